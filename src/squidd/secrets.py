"""Collects the secret values of the settings so the log redactor can scrub them anywhere."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr

from squidd.config import Settings


def known_secrets(settings: Settings) -> list[str]:
    found: list[str] = []

    def walk(model: BaseModel) -> None:
        for name in type(model).model_fields:
            value = getattr(model, name)
            if isinstance(value, SecretStr):
                found.append(value.get_secret_value())
            elif isinstance(value, BaseModel):
                walk(value)

    walk(settings)
    return [s for s in found if s]
