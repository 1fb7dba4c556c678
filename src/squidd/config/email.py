"""The `[email]` section: IMAP in, SMTP out, who may write to the bot, and the safety limits.

Defaults are the safe choice: implicit TLS with certificate verification on both sides,
nobody allowed until listed, and mail answered only when the configured receiving server
vouches for its sender (`Authentication-Results` with DMARC or aligned DKIM pass).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from squidd.config._base import Section

Security = Literal["tls", "starttls", "none"]

# Servers drop an IDLE after 30 minutes (RFC 2177); re-issue it safely before that.
_IDLE_MAX_S = 29 * 60


def _lower_list(values: list[str]) -> list[str]:
    return [v.strip().lower() for v in values if v.strip()]


class EmailSettings(Section):
    """One mailbox: read over IMAP, replies sent over SMTP from `address`."""

    secret_fields: ClassVar[tuple[str, ...]] = ("password", "smtp_password")
    credential_prefix: ClassVar[str] = "email"

    enabled: bool = False
    address: str = ""
    """The bot's own address: From of every reply, and never answered itself."""
    from_name: str = "squidd"

    # --- IMAP (receiving) ----------------------------------------------------------------
    username: str = ""
    """Login name; empty: the address."""
    password: SecretStr | None = None
    password_file: Path | None = None
    imap_host: str = ""
    imap_port: int = Field(default=993, gt=0, lt=65536)
    imap_security: Security = "tls"
    folder: str = "INBOX"
    move_to: str = ""
    """Empty: a handled mail is flagged \\Seen where it is. Else it is also moved here."""
    backlog: Literal["skip", "answer"] = "skip"
    """Unseen mail already in the folder at the first start (no state kept for it yet):
    `skip` leaves it unread and unanswered (one log line with the count), `answer` answers
    it. Mail arriving after the first start is answered either way."""
    idle: bool = True
    idle_renew_s: float = Field(default=25 * 60, gt=0, le=_IDLE_MAX_S)
    poll_interval_s: float = Field(default=60.0, gt=0)

    # --- SMTP (sending) ------------------------------------------------------------------
    smtp_host: str = ""
    smtp_port: int = Field(default=465, gt=0, lt=65536)
    smtp_security: Security = "tls"
    smtp_username: str = ""
    """Empty: the IMAP `username`. Set `smtp_auth = false` for a relay without login."""
    smtp_password: SecretStr | None = None
    smtp_password_file: Path | None = None
    smtp_auth: bool = True

    # --- both ----------------------------------------------------------------------------
    ca_file: Path | None = None
    """Extra CA certificate(s) (PEM) for a self-hosted server; the system store otherwise."""
    timeout_s: float = Field(default=30.0, gt=0)
    reconnect_initial_delay_s: float = Field(default=1.0, gt=0)
    reconnect_max_delay_s: float = Field(default=300.0, gt=0)

    # --- what the model sees -------------------------------------------------------------
    max_size_bytes: int = Field(default=10_000_000, gt=0)
    oversize_action: Literal["reply", "skip"] = "reply"
    """`reply`: the assistant is told the mail was too large (not its content) and answers;
    `skip`: the mail is left unread and logged."""
    max_text_chars: int = Field(default=20_000, gt=0)
    allowed_attachment_types: list[str] = Field(default_factory=list)
    """MIME types (`application/pdf`, `image/*`) whose attachments are stored and read;
    the rest are only listed by name, type and size. Empty: none is read."""
    max_attachments: int = Field(default=5, ge=0, le=100)
    max_attachment_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    max_reply_attachment_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    """The files of one reply together, at most; a file past it is named in the text."""

    @field_validator("allowed_attachment_types")
    @classmethod
    def _mime_patterns(cls, value: list[str]) -> list[str]:
        value = [item.strip().lower() for item in value]
        for item in value:
            if not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*/(\*|[a-z0-9][a-z0-9.+-]*)", item):
                raise ValueError(
                    f"{item!r} must be a MIME type such as 'application/pdf' or 'image/*'"
                )
        return value

    # --- who is answered -----------------------------------------------------------------
    allowed_senders: list[str] = Field(default_factory=list)
    allowed_domains: list[str] = Field(default_factory=list)
    require_authentication: bool = True
    trusted_authserv_id: str = ""
    """The authserv-id your receiving server writes first in `Authentication-Results`
    (e.g. `mx.google.com`, `mx.example.org`)."""
    rate_limit_count: int = Field(default=10, gt=0)
    rate_limit_window_s: float = Field(default=3600.0, gt=0)

    @field_validator("allowed_senders", "allowed_domains")
    @classmethod
    def _normalise(cls, value: list[str]) -> list[str]:
        return _lower_list(value)

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        return [v.removeprefix("@") for v in value]

    @model_validator(mode="after")
    def _complete_when_enabled(self) -> EmailSettings:
        if not self.enabled:
            return self
        missing = [
            name for name in ("address", "imap_host", "smtp_host") if not getattr(self, name)
        ]
        if missing:
            raise ValueError(f"email is enabled but {', '.join(missing)} not set")
        if "@" not in self.address:
            raise ValueError("address must be an email address")
        if not self.username:
            # Most providers log in with the address itself.
            object.__setattr__(self, "username", self.address)
        if self.password is None:
            raise ValueError("email is enabled but password (or password_file) is not set")
        if self.require_authentication and not self.trusted_authserv_id.strip():
            raise ValueError(
                "set trusted_authserv_id (the server name your provider writes in "
                "Authentication-Results) or, for a local setup only, "
                "require_authentication = false"
            )
        if self.reconnect_max_delay_s < self.reconnect_initial_delay_s:
            raise ValueError("reconnect_max_delay_s must be >= reconnect_initial_delay_s")
        return self

    @property
    def smtp_login(self) -> tuple[str, SecretStr] | None:
        """Credentials for SMTP AUTH, or None for an unauthenticated relay."""
        if not self.smtp_auth:
            return None
        password = self.smtp_password or self.password
        if password is None:
            return None
        return (self.smtp_username or self.username, password)
