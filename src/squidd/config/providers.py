"""The model providers: `[[llm.providers]]` (an endpoint, its keys, the models it serves)
and `[llm] chain`, the ordered provider/model pairs a turn tries.

A provider's keys live in credential files (`api_key_files`, one key per file, 0600),
never in the config; a local server (`ollama`, `llamacpp`, `vllm`) needs none. A config
without `[[llm.providers]]` is today's one endpoint: `[llm]`'s `base_url`, key, `model` and
`fallback_models` become the provider "default" and a chain of its models
(`LLMSettings.resolved()`), so a config written before providers existed works unchanged.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from squidd.config._base import Section, read_secret_file

__all__ = [
    "LOCAL_KINDS",
    "ChainEntry",
    "ModelPrice",
    "ProviderKind",
    "ProviderModel",
    "ProviderSettings",
    "check_http_url",
]

ProviderKind = Literal["openai", "ollama", "llamacpp", "vllm"]
LOCAL_KINDS = frozenset({"ollama", "llamacpp", "vllm"})
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_http_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


class ModelPrice(Section):
    """Money per million tokens for one model (any currency; `squidd usage` shows it)."""

    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)
    cached_input: float | None = Field(default=None, ge=0)


class ProviderModel(Section):
    """One model a provider serves: its window, prices and what it reads."""

    name: str
    context_window: int | None = Field(default=None, ge=1024)
    """Tokens; unset: `llm.context_window`. A local server's own figure wins when smaller."""
    vision: bool | None = None
    """It reads images; unset: `llm.vision`."""
    prices: ModelPrice | None = None

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip() or any(c.isspace() for c in value):
            raise ValueError("must name a model (no spaces)")
        return value


class ProviderSettings(Section):
    """One endpoint with its keys and models (`[[llm.providers]]`)."""

    name: str
    kind: ProviderKind = "openai"
    base_url: str
    api_key_files: list[Path] = Field(default_factory=list)
    timeout_s: float | None = Field(default=None, gt=0)
    connect_timeout_s: float | None = Field(default=None, gt=0)
    cooldown_s: float | None = Field(default=None, gt=0)
    """Seconds this provider is left alone after it failed; unset: `llm.cooldown_s`."""
    models: list[ProviderModel] = Field(default_factory=list)

    _keys: list[SecretStr] = PrivateAttr(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError(
                "must be a short name of letters, digits, '.', '_' or '-' (it is written in "
                "the chain as NAME/model)"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value)

    @model_validator(mode="after")
    def _read_keys(self) -> ProviderSettings:
        keys = [read_secret_file(path.expanduser()) for path in self.api_key_files]
        cred_dir = os.environ.get("CREDENTIALS_DIRECTORY")
        if not keys and cred_dir:
            candidate = Path(cred_dir) / f"llm_{self.name}_api_key"
            if candidate.is_file():
                keys = [read_secret_file(candidate)]
        names = [model.name for model in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"provider {self.name}: a model is listed twice")
        self._keys = keys
        return self

    @property
    def keys(self) -> list[SecretStr]:
        """The provider's API keys in their configured order (none: a local server)."""
        return list(self._keys)

    def with_keys(self, keys: list[SecretStr]) -> ProviderSettings:
        """A copy holding `keys` (the provider made from a pre-provider `[llm]` section)."""
        copy = self.model_copy()
        copy._keys = list(keys)
        return copy

    def model(self, name: str) -> ProviderModel | None:
        return next((m for m in self.models if m.name == name), None)


@dataclass(frozen=True, slots=True)
class ChainEntry:
    """One provider/model pair of the chain, with what the config says of the model."""

    provider: ProviderSettings
    model: str
    context_window: int
    vision: bool
    prices: ModelPrice | None

    @property
    def label(self) -> str:
        return f"{self.provider.name}/{self.model}"


def split_entry(text: str) -> tuple[str, str]:
    """`"main/gpt-4o"` → ("main", "gpt-4o"); the model part may hold more slashes."""
    provider, sep, model = text.partition("/")
    if not sep or not provider or not model.strip():
        raise ValueError(f"chain entry {text!r} must be PROVIDER/MODEL, e.g. 'main/gpt-4o-mini'")
    return provider, model
