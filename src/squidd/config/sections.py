"""Core configuration sections: the LLM, the agent and memory, storage, logging, the
gateway and cron. Channel, tool and heartbeat sections live beside this file."""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from squidd.config._base import Endpoint, Section
from squidd.config.agents import AgentEntry
from squidd.config.checks import check_timezone
from squidd.config.providers import (
    ChainEntry,
    ModelPrice,
    ProviderSettings,
    check_http_url,
    split_entry,
)


def default_data_dir() -> Path:
    """`$STATE_DIRECTORY` under systemd, else the XDG data home."""
    state = os.environ.get("STATE_DIRECTORY")
    if state:
        # systemd may pass several colon-separated dirs; the first is ours.
        return Path(state.split(":")[0])
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "squidd"


class LLMSettings(Endpoint):
    """The model: one OpenAI-compatible endpoint (`base_url`, key, `model`,
    `fallback_models`), or providers and the chain of provider/model pairs a turn tries
    (config/providers.py). The other keys hold for every provider unless it sets its own."""

    credential_prefix: ClassVar[str] = "llm"

    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    fallback_models: list[str] = Field(default_factory=list)
    # The TCP connect and the TLS handshake: a server that takes the connection but gives no
    # TLS answer (a plain-HTTP server behind an https:// URL) is named within this bound.
    connect_timeout_s: float = Field(default=5.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    retry_base_delay_s: float = Field(default=1.0, ge=0)
    retry_max_delay_s: float = Field(default=30.0, ge=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    # The model's context window in tokens: the prompt budget is taken from it.
    context_window: int = Field(default=128_000, ge=1024)
    # Money per million tokens, by model name (`squidd usage`, `limits.daily_cost`).
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    vision: bool = False
    """The model reads images: image attachments are sent as image content parts."""
    providers: list[ProviderSettings] = Field(default_factory=list)
    chain: list[str] = Field(default_factory=list)
    """Provider/model pairs in the order a call tries them ("main/gpt-4o-mini")."""
    cooldown_s: float = Field(default=60.0, gt=0)
    """Seconds a provider is left alone after `failures_to_cool` failures in a row (or the
    wait its Retry-After or rate-limit reset named, when longer)."""
    failures_to_cool: int = Field(default=3, ge=1, le=100)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_http_url(value)

    @model_validator(mode="after")
    def _chain_names_providers(self) -> LLMSettings:
        if not self.providers:
            if self.chain:
                raise ValueError("chain names providers: add [[llm.providers]] for them")
            return self
        legacy = {"base_url", "api_key", "api_key_file", "fallback_models", "model"}
        mixed = sorted(legacy & self.model_fields_set)
        if mixed:
            raise ValueError(
                f"with [[llm.providers]], {', '.join(mixed)} belong to a provider (or the "
                "chain): remove them from [llm]"
            )
        names = [p.name for p in self.providers]
        if len(set(names)) != len(names):
            raise ValueError("two providers have the same name")
        if not self.chain and not any(p.models for p in self.providers):
            raise ValueError('set chain = ["PROVIDER/MODEL", ...] (or list a provider\'s models)')
        for text in self.chain:
            provider, _ = split_entry(text)
            if provider not in names:
                raise ValueError(f"chain entry {text!r}: no provider named {provider!r}")
        if len(set(self.chain)) != len(self.chain):
            raise ValueError("the chain names one provider/model pair twice")
        return self

    def resolved_providers(self) -> list[ProviderSettings]:
        """The providers; a config without any gives the one endpoint of `[llm]` as
        "default" (its key, if any, as the provider's one key)."""
        if self.providers:
            return list(self.providers)
        default = ProviderSettings(
            name="default",
            base_url=self.base_url,
            timeout_s=self.timeout_s,
            connect_timeout_s=self.connect_timeout_s,
        )
        return [default.with_keys([self.api_key] if self.api_key else [])]

    def resolved_chain(self) -> list[ChainEntry]:
        """The provider/model pairs in order, each with its window, vision and prices."""
        providers = {p.name: p for p in self.resolved_providers()}
        if not self.providers:
            pairs = [("default", m) for m in dict.fromkeys([self.model, *self.fallback_models])]
        elif self.chain:
            pairs = [split_entry(text) for text in self.chain]
        else:
            pairs = [(p.name, m.name) for p in self.providers for m in p.models]
        entries = []
        for provider_name, model in pairs:
            provider = providers[provider_name]
            listed = provider.model(model)
            entries.append(
                ChainEntry(
                    provider=provider,
                    model=model,
                    context_window=(listed.context_window if listed else None)
                    or self.context_window,
                    vision=self.vision
                    if listed is None or listed.vision is None
                    else listed.vision,
                    prices=(listed.prices if listed else None) or self.prices.get(model),
                )
            )
        return entries


class AgentSettings(Section):
    """The agent loop and its memory (see the memory design documents)."""

    consolidation_threshold: int = Field(default=100, gt=0)
    keep_recent_ratio: float = Field(default=0.2, gt=0, lt=1)
    max_tool_rounds: int = Field(default=20, gt=0, le=200)
    workspace: Path | None = None
    system_prompt: str = ""
    memory_max_chars: int = Field(default=20_000, gt=0)
    # The prompt's budget: a fraction (0 < x <= 1) of llm.context_window, or a token count.
    context_budget: float = Field(default=0.75, gt=0)
    # Caps, in tokens, of the system prompt's parts (0: no cap beyond the budget).
    memory_tokens: int = Field(default=6_000, ge=0)
    summary_tokens: int = Field(default=500, ge=0)
    extra_prompt_tokens: int = Field(default=2_000, ge=0)
    # The same tool with the same arguments this many times in a row ends the tool calls.
    max_repeated_tool_calls: int = Field(default=3, ge=1, le=100)
    # Seconds of tool calling per turn before the model is asked for a final answer.
    max_turn_seconds: float = Field(default=600.0, gt=0)
    memory_scope: Literal["auto", "shared", "person"] = "auto"
    """Whose MEMORY.md a turn reads and `memory_write` writes: "shared" (one for everyone),
    "person" (each person their own; group rooms the shared one), "auto" (person when more
    than one person may talk to the assistant)."""
    # Last: the field's name is `list`, as the config writes it ([[agents.list]]).
    list: builtins.list[AgentEntry] = Field(default_factory=builtins.list)
    """The agents (config/agents.py); empty: one agent, as before."""

    @field_validator("context_budget")
    @classmethod
    def _budget(cls, value: float) -> float:
        if value > 1 and value != int(value):
            raise ValueError("must be a fraction (0 < x <= 1) or a whole number of tokens")
        return value

    @model_validator(mode="after")
    def _agents_apart(self) -> AgentSettings:
        names = [entry.name for entry in self.list]
        if len(set(names)) != len(names):
            raise ValueError("list: two agents have the same name")
        rooms = [room for entry in self.list for room in entry.rooms]
        if len(set(rooms)) != len(rooms):
            raise ValueError("list: a room is routed to two agents")
        addresses = [a for entry in self.list for a in entry.addresses]
        if len(set(addresses)) != len(addresses):
            raise ValueError("list: an address is routed to two agents")
        return self


class PersonSettings(Section):
    """One person of the household (`[[people]]`): their ids on every channel are one
    person, with one memory of their own."""

    name: str
    ids: list[str] = Field(default_factory=list)
    """Their Matrix ids and email addresses (as the channels name senders)."""
    daily_tokens: int | None = Field(default=None, gt=0)
    """Tokens their turns may use per day (`[limits]`'s day); unset: no cap of their own."""
    daily_cost: float | None = Field(default=None, gt=0)
    """Money their turns may cost per day, priced as `squidd usage` prices."""
    approvers: list[str] = Field(default_factory=list)
    """Who may answer the approval questions of their turns (people's names or ids);
    empty: `tools.approval.approvers`, as for everyone."""

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name the person")
        return value.strip()

    @field_validator("ids")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        return [v.strip() for v in value if v.strip()]


class StorageSettings(Section):
    """Where squidd keeps its state (the embedded JSONL store)."""

    data_dir: Path = Field(default_factory=default_data_dir)

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()


class LoggingSettings(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"


class GatewaySettings(Section):
    """The daemon: concurrency, shutdown, restart and delivery behaviour."""

    # 64: at a 0.5 s model call, about what one core of the daemon turns over (P2 and the
    # API benchmark, docs/performance.md "Concurrency"); more only queues inside the loop.
    max_concurrent_turns: int = Field(default=64, gt=0, le=1000)
    shutdown_grace_s: float = Field(default=30.0, ge=0)
    restart_initial_delay_s: float = Field(default=1.0, gt=0)
    restart_max_delay_s: float = Field(default=300.0, gt=0)
    healthy_after_s: float = Field(default=60.0, gt=0)
    handled_retention_days: int = Field(default=30, gt=0)
    delivery_retry_initial_s: float = Field(default=2.0, gt=0)
    delivery_retry_max_s: float = Field(default=120.0, gt=0)
    # Attempts at one input whose failure is not known to pass before it is parked.
    max_attempts: int = Field(default=3, ge=1, le=100)
    # How often the daemon looks for `squidd parked retry` requests.
    parked_poll_s: float = Field(default=5.0, gt=0)
    # A turn cut short (a crash) resumes from its journal when its message comes back; a
    # journal older than this is not resumed: the person is told the request was not done.
    journal_max_age_hours: float = Field(default=24.0, gt=0)
    # A daemon with no channel (no Matrix, email or API) and no model set up refuses to
    # start, naming `squidd init --interactive`; true says such a set-up is meant (cron and
    # heartbeat only, or a model reached without a key) and starts it. Same as `run
    # --allow-empty`.
    allow_empty: bool = False

    @model_validator(mode="after")
    def _delays(self) -> GatewaySettings:
        if self.restart_max_delay_s < self.restart_initial_delay_s:
            raise ValueError("restart_max_delay_s must be >= restart_initial_delay_s")
        if self.delivery_retry_max_s < self.delivery_retry_initial_s:
            raise ValueError("delivery_retry_max_s must be >= delivery_retry_initial_s")
        return self


class CronSettings(Section):
    enabled: bool = True
    misfire_grace_s: float = Field(default=300.0, ge=0)
    default_timezone: str = "UTC"
    # How often the daemon looks for jobs changed by `squidd cron add|remove`.
    poll_s: float = Field(default=5.0, gt=0, le=300)

    @field_validator("default_timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        return check_timezone(value)
