"""Secret values: read one where it is needed, and collect all of them for the log redactor."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr

from squidd.config import Settings


def secret_value(secret: SecretStr | None) -> str | None:
    """The plain value of a configured secret, for the one call that needs it."""
    return None if secret is None else secret.get_secret_value()


def known_secrets(settings: Settings) -> list[str]:
    found: list[str] = []

    # Secrets also sit in lists and dicts (the MCP servers' env_files / header_files).
    def walk(value: object) -> None:
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                walk(getattr(value, name))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(settings)
    return [s for s in found if s]
