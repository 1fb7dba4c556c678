"""A Matrix bot account of its own for an agent (`[agents.list.matrix]`), and the accounts a
config runs.

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
from squidd.config.matrix import MatrixSettings

__all__ = ["MATRIX", "AgentMatrix", "account_channel", "account_matrix"]

_MXID_RE = re.compile(r"^@[^:\s]+:[^\s]+$")
MATRIX = "matrix"


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
        if not _MXID_RE.match(value):
            raise ValueError("must be a full Matrix user id like '@planner:example.org'")
        return value

    @field_validator("homeserver")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _secrets(self) -> AgentMatrix:
        for name in ("access_token", "password"):
            path: Path | None = getattr(self, f"{name}_file")
            if path is None:
                continue
            if getattr(self, name) is not None:
                raise ValueError(f"set either {name} or {name}_file, not both")
            object.__setattr__(self, name, read_secret_file(path))
        if self.access_token is None and self.password is None:
            raise ValueError("set password (or password_file) or access_token (or its file)")
        return self


def account_channel(agent: str) -> str:
    """The channel name of agent `agent`'s own account."""
    return f"{MATRIX}-{agent}"


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
