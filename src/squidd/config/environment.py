"""The environment's `SQUIDD_<SECTION>__<KEY>` values, laid over the config file's.

Any key of the configuration can be given as an environment variable: the name upper- or
lowercase, `__` between a section and its key (`SQUIDD_LLM__MODEL`,
`SQUIDD_TOOLS__SHELL__ENABLED`), a list or table as JSON (`SQUIDD_LLM__FALLBACK_MODELS=
'["a", "b"]'`), a whole section too (`SQUIDD_LLM='{"model": "x"}'`), its keys laid over
the file's one by one. Reading them is pydantic-settings' work (its environment source:
nesting, JSON for the keys that hold lists, tables and sections, case); it is imported
only when such a variable is set, which a daemon with its config in a file does not pay
for at every start (docs/performance.md, "Start and idle memory"). `SQUIDD_CONFIG` names
the file and is not a key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from squidd.errors import ConfigError

__all__ = ["PREFIX", "environment_overrides", "overlay"]

PREFIX = "SQUIDD_"
DELIMITER = "__"


def _names_a_key(name: str, model: type[BaseModel]) -> bool:
    if not name.upper().startswith(PREFIX):
        return False
    first = name[len(PREFIX) :].partition(DELIMITER)[0].lower()
    return first in model.model_fields


def environment_overrides(model: type[BaseModel]) -> dict[str, Any]:
    """The values the environment gives for `model`'s keys, nested as the file's tables
    are; empty (and nothing imported) when no variable names one. A list or table that is
    not JSON is a `ConfigError` naming its key, never its value."""
    if not any(_names_a_key(name, model) for name in os.environ):
        return {}
    from pydantic_settings import EnvSettingsSource, SettingsError

    source = EnvSettingsSource(
        model,  # type: ignore[arg-type]  # its model_config supplies nothing it needs
        case_sensitive=False,
        env_prefix=PREFIX,
        env_nested_delimiter=DELIMITER,
    )
    try:
        return dict(source())
    except SettingsError as exc:
        # pydantic-settings names the section ("... for field "llm" ..."), never the value
        found = re.search(r'field "(\w+)"', str(exc))
        where = f"{PREFIX}{found.group(1).upper()}..." if found else f"{PREFIX}..."
        raise ConfigError(
            [f"environment: a {where} value is not valid JSON (lists and tables are given as JSON)"]
        ) from None


def overlay(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `top`'s values over it: tables merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = overlay(below, value)
        else:
            merged[key] = value
    return merged
