"""The `[matrix]` section: homeserver, bot credentials, who may talk to the bot."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr

from squidd.config._base import Section


class MatrixSettings(Section):
    secret_fields: ClassVar[tuple[str, ...]] = ("access_token", "password")
    credential_prefix: ClassVar[str] = "matrix"

    enabled: bool = False
    homeserver: str = ""
    user_id: str = ""
    access_token: SecretStr | None = None
    access_token_file: Path | None = None
    password: SecretStr | None = None
    password_file: Path | None = None
    device_name: str = "squidd"
    allowed_users: list[str] = Field(default_factory=list)
    allowed_servers: list[str] = Field(default_factory=list)
    allowed_rooms: list[str] = Field(default_factory=list)
    open_rooms: list[str] = Field(default_factory=list)
    e2ee: bool = True
