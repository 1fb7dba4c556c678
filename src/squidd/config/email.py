"""The `[email]` section: IMAP in, SMTP out, who may write to the bot."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr

from squidd.config._base import Section


class EmailSettings(Section):
    secret_fields: ClassVar[tuple[str, ...]] = ("password",)
    credential_prefix: ClassVar[str] = "email"

    enabled: bool = False
    address: str = ""
    username: str = ""
    password: SecretStr | None = None
    password_file: Path | None = None
    imap_host: str = ""
    imap_port: int = Field(default=993, gt=0, lt=65536)
    smtp_host: str = ""
    smtp_port: int = Field(default=465, gt=0, lt=65536)
    allowed_senders: list[str] = Field(default_factory=list)
    allowed_domains: list[str] = Field(default_factory=list)
