"""One way for tests to configure squidd: the sections every test starts from, written as a
TOML file for a `squidd run` child or handed to `Settings` for a daemon in this process.

A test names only what it is about (its channel, its delays); `sections` add keys to a
section or override them, section by section.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

Sections = dict[str, dict[str, Any]]


def config_sections(llm_url: str, data_dir: Path, *, api_key: str, **sections: Any) -> Sections:
    """The scripted LLM (no retries: a failure shows at once) and the data dir, plus
    `sections`. `api_key` differs per test file, so a leak in a log names its test."""
    merged: Sections = {
        "llm": {"base_url": llm_url, "api_key": api_key, "max_retries": 0},
        "storage": {"data_dir": str(data_dir)},
    }
    for name, values in sections.items():
        if not isinstance(values, Mapping):  # a top-level list (`people`)
            merged[name] = values
            continue
        merged[name] = {**merged.get(name, {}), **values}
    if "providers" in merged["llm"]:  # a chain of providers replaces the one endpoint
        for key in ("base_url", "api_key"):
            merged["llm"].pop(key)
    return merged


def provider(name: str, llm: Any, **keys: Any) -> dict[str, Any]:
    """One `[[llm.providers]]` entry for a scripted server (`llm.base_url`)."""
    return {"name": name, "kind": "openai", "base_url": llm.base_url, **keys}


def _key(key: str) -> str:
    """A bare TOML key as it is; any other (a Matrix room id) quoted."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, Mapping):  # an inline table: `{ channel = "terminal", ... }`
        pairs = (f"{_key(key)} = {_value(item)}" for key, item in value.items())
        return "{ " + ", ".join(pairs) + " }"
    if isinstance(value, list | tuple) and any(isinstance(item, Mapping) for item in value):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, str | bool | int | float | list | tuple):
        # A JSON string, number, boolean or array of them is the same value in TOML.
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"no TOML form for {value!r} in a test config")


def write_config(path: Path, sections: Mapping[str, Mapping[str, Any]]) -> Path:
    """`sections` (`{"matrix": {"enabled": True}, "tools.shell": {...}}`) as TOML at `path`;
    a mapping (or a list of them) is written as an inline table."""
    lines: list[str] = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines.extend(f"{key} = {_value(value)}" for key, value in values.items())
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_daemon_config(
    tmp: Path, llm_url: str, *, api_key: str, **sections: Mapping[str, Any]
) -> Path:
    """`tmp/config.toml` for a `squidd run` child with its data in `tmp/data` and JSON debug
    logs (the tests read the daemon's log to follow it)."""
    logging = {"format": "json", "level": "debug", **sections.pop("logging", {})}
    merged = config_sections(llm_url, tmp / "data", api_key=api_key, logging=logging, **sections)
    return write_config(tmp / "config.toml", merged)


def data_dir_config(tmp: Path, data: Path | None = None, **sections: Mapping[str, Any]) -> Path:
    """`tmp/config.toml` naming only the data dir (`tmp/data` unless `data`) and `sections`:
    for commands run in this process or without a model."""
    storage = {"data_dir": str(data if data is not None else tmp / "data")}
    return write_config(tmp / "config.toml", {"storage": storage, **sections})
