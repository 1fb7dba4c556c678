"""Accounts of its own for an agent: a Matrix bot account (`[agents.list.matrix]`) and a
mailbox (`[agents.list.email]`).

A mailbox of its own works the same way: `[email]` is the default agent's mailbox and the
template; an agent's sets its `address` and login (`username`, `password` or its file, the
SMTP login if it differs, optionally its own hosts) and takes the rest — servers' security,
who may write, authentication checks, limits — from `[email]`. Its channel is
`email-<agent>`, its state under the agent's store dir (`agents/<name>/email/`).

The `[matrix]` section is the default agent's account and the template of every other: an
agent's account sets who it is (`user_id`, its password or token, optionally its own
`homeserver` and `device_name`) and takes everything else — who may talk to it, e2ee, device
trust, streaming, rates — from `[matrix]`. Each account is a channel of its own, named
`matrix-<agent>`, with its own device, cross-signing identity and recovery key kept under the
agent's store dir (`agents/<name>/matrix/`); what arrives on it is that agent's.

An agent account's secrets come inline or from its `password_file` / `access_token_file`
(for systemd credentials, point the file at the credentials directory); the systemd
credential names of `[matrix]` (`matrix_password`, …) stay the default account's alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import SecretStr, field_validator, model_validator

from squidd.config._base import Section, read_secret_file
from squidd.config.email import EmailSettings
from squidd.config.matrix import MatrixSettings, check_homeserver, check_mxid

__all__ = [
    "EMAIL",
    "MATRIX",
    "AgentMail",
    "AgentMatrix",
    "account_channel",
    "account_mail",
    "account_matrix",
]

MATRIX = "matrix"
EMAIL = "email"
_ADDRESS_RE = re.compile(r"^[^@\s]+@[^@\s]+$")


def _read_files(section: Section, names: tuple[str, ...]) -> None:
    """`<name>_file` into `<name>` (never both); no systemd credential lookup: those names
    are the default account's."""
    for name in names:
        path: Path | None = getattr(section, f"{name}_file")
        if path is None:
            continue
        if getattr(section, name) is not None:
            raise ValueError(f"set either {name} or {name}_file, not both")
        object.__setattr__(section, name, read_secret_file(path))


class AgentMatrix(Section):
    """An agent's own bot account: who it is; the rest comes from `[matrix]`."""

    user_id: str
    """The account's full MXID, e.g. `@planner:example.org`."""
    homeserver: str = ""
    """Unset: `[matrix] homeserver`."""
    access_token: SecretStr | None = None
    access_token_file: Path | None = None
    password: SecretStr | None = None
    password_file: Path | None = None
    device_name: str = ""
    """Unset: `[matrix] device_name` and the agent's name."""

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str) -> str:
        return check_mxid(value)

    @field_validator("homeserver")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_homeserver(value)

    @model_validator(mode="after")
    def _secrets(self) -> AgentMatrix:
        _read_files(self, ("access_token", "password"))
        if self.access_token is None and self.password is None:
            raise ValueError("set password (or password_file) or access_token (or its file)")
        return self


class AgentMail(Section):
    """An agent's own mailbox: its address and login; the rest comes from `[email]`."""

    address: str
    """The mailbox's address: From of its replies, and never answered itself."""
    username: str = ""
    """IMAP login; empty: the address."""
    password: SecretStr | None = None
    password_file: Path | None = None
    smtp_username: str = ""
    """Empty: `username` (or the address)."""
    smtp_password: SecretStr | None = None
    smtp_password_file: Path | None = None
    """Unset: `password`."""
    imap_host: str = ""
    """Unset: `[email] imap_host` (likewise `smtp_host`, the ports)."""
    imap_port: int | None = None
    smtp_host: str = ""
    smtp_port: int | None = None
    from_name: str = ""
    """Unset: the agent's name."""

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        if not _ADDRESS_RE.match(value.strip()):
            raise ValueError("must be a mail address like 'planner@example.org'")
        return value.strip().lower()

    @model_validator(mode="after")
    def _secrets(self) -> AgentMail:
        _read_files(self, ("password", "smtp_password"))
        if self.password is None:
            raise ValueError("set password (or password_file)")
        return self


def account_channel(agent: str, kind: str = MATRIX) -> str:
    """The channel name of agent `agent`'s own account of `kind` (`matrix-planner`)."""
    return f"{kind}-{agent}"


def account_mail(base: EmailSettings, agent: str, own: AgentMail) -> EmailSettings:
    """Agent `agent`'s mailbox as a whole `[email]`: `own`'s address and login over
    `base`'s rest."""
    return base.model_copy(
        update={
            "enabled": True,
            "address": own.address,
            "from_name": own.from_name or agent,
            "username": own.username or own.address,
            "password": own.password,
            "password_file": None,
            "smtp_username": own.smtp_username,
            "smtp_password": own.smtp_password or own.password,
            "smtp_password_file": None,
            "imap_host": own.imap_host or base.imap_host,
            "imap_port": own.imap_port or base.imap_port,
            "smtp_host": own.smtp_host or base.smtp_host,
            "smtp_port": own.smtp_port or base.smtp_port,
        }
    )


def account_matrix(base: MatrixSettings, agent: str, own: AgentMatrix) -> MatrixSettings:
    """Agent `agent`'s account as a whole `[matrix]`: `own`'s who over `base`'s rest."""
    return base.model_copy(
        update={
            "enabled": True,
            "homeserver": own.homeserver or base.homeserver,
            "user_id": own.user_id,
            "access_token": own.access_token,
            "access_token_file": None,
            "password": own.password,
            "password_file": None,
            "device_name": own.device_name or f"{base.device_name} ({agent})",
        }
    )
