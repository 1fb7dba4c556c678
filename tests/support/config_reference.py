"""The configuration reference (docs/config-reference.md), generated from the settings model.

Every key `Settings` accepts, section by section, with its type and default; a key's meaning
is in the comment above it in config.example.toml. `python -m tests.support.config_reference`
writes the file; tests/test_docs.py fails while it is out of date.
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from squidd.config import Settings

REPO = Path(__file__).resolve().parents[2]
TARGET = REPO / "docs" / "config-reference.md"
HEADER = """# Configuration reference

Generated from the settings model by `python -m tests.support.config_reference` (a test
fails when it is out of date). Each key's meaning is in the comment above it in
[config.example.toml](../config.example.toml); how the file is found, environment
overrides and secret files are in [configuration.md](configuration.md). A secret key
(`password`, `api_key`, `access_token`) is best given as `<key>_file` or as a systemd
credential, never in the file itself.
"""


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model inside an annotation (`X`, `list[X]`, `X | None`) and the key's suffix."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list and args:
        inner, _ = _model_of(args[0])
        return inner, "[]"
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            inner, suffix = _model_of(arg)
            if inner is not None:
                return inner, suffix
    return None, ""


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation)
    for noise in (
        "typing.",
        "pathlib.",
        "pydantic.types.",
        "squidd.config.sections.",
        "squidd.config.",
    ):
        text = text.replace(noise, "")
    return text


def _default(field: Any) -> str:
    if field.default is not PydanticUndefined:
        value = field.default
    elif field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "(computed)"
    else:
        return "(required)"
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path) and field.default_factory is not None:
        return "(see configuration.md)"  # from the environment (XDG, systemd)
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text.replace("|", "\\|")


def keys(model: type[BaseModel] = Settings, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, type, default) of every key under `model`."""
    found: list[tuple[str, str, str]] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = f"{prefix}{name}"
        inner, suffix = _model_of(field.annotation)
        if inner is not None:
            found.extend(keys(inner, f"{key}{suffix}."))
        else:
            found.append((key, _type_name(field.annotation), _default(field)))
    return found


def render() -> str:
    lines = [HEADER]
    section = None
    for key, kind, default in keys():
        head = key.rsplit(".", 1)[0] if "." in key else "(top level)"
        if head != section:
            section = head
            title = f"`[{head}]`" if "." in key else "Top level (before any section)"
            lines += ["", f"## {title}", "", "| key | type | default |", "|---|---|---|"]
        kind = kind.replace("|", "\\|")
        lines.append(f"| `{key}` | `{kind}` | {default} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    TARGET.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {TARGET}\n")
