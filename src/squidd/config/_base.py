"""Shared pieces of the configuration sections: strictness and secrets read from files.

A secret (API key, password, token) can be given inline, as `<key>_file = "/path"`, or by
systemd `LoadCredential=` as `$CREDENTIALS_DIRECTORY/<section>_<key>`. Values are kept as
`SecretStr`, so they never show up in a repr, a log line or an error message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


def read_secret_file(path: Path) -> SecretStr:
    """Read a secret from a file, without its trailing newline."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read secret file {path}: {exc.strerror}") from None
    value = text.rstrip("\r\n")
    if not value:
        raise ValueError(f"secret file {path} is empty")
    return SecretStr(value)


class Section(BaseModel):
    """A config section: unknown keys are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Names of SecretStr fields that may also come from `<name>_file` or a systemd credential.
    secret_fields: ClassVar[tuple[str, ...]] = ()
    # Prefix of the credential file name: `<credential_prefix>_<field>`.
    credential_prefix: ClassVar[str] = ""

    @model_validator(mode="after")
    def _resolve_secrets(self) -> Section:
        cred_dir = os.environ.get("CREDENTIALS_DIRECTORY")
        for name in self.secret_fields:
            inline = getattr(self, name)
            file_path: Path | None = getattr(self, f"{name}_file", None)
            if file_path is not None:
                if inline is not None:
                    raise ValueError(f"set either {name} or {name}_file, not both")
                object.__setattr__(self, name, read_secret_file(file_path))
            elif inline is None and cred_dir:
                candidate = Path(cred_dir) / f"{self.credential_prefix}_{name}"
                if candidate.is_file():
                    object.__setattr__(self, name, read_secret_file(candidate))
        return self


class Endpoint(Section):
    """An OpenAI-compatible HTTP endpoint: where, with which key (inline, in `api_key_file`
    or a systemd credential), which model, how long a call may take. Sections for one kind
    of endpoint (`[llm]`, `[transcription]`) add their own keys and defaults."""

    secret_fields: ClassVar[tuple[str, ...]] = ("api_key",)

    base_url: str = ""
    api_key: SecretStr | None = None
    api_key_file: Path | None = None
    model: str = ""
    timeout_s: float = Field(default=120.0, gt=0)

    @field_validator("model")
    @classmethod
    def _model_named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a model")
        return value
