"""The model as the core sees it (`LLMPort`): an ordered chain of provider/model pairs,
tried in turn within one call.

A call starts at the head of the chain and passes by every provider that is cooling down
(llm/breaker.py: no request is sent to it). It falls over to the next pair on a connection
error, a timeout, a 5xx, a 429 (after the provider's other keys), a refused key (after the
other keys; the operator is told once) or a model that refuses the request; text already
streamed from a failed attempt is voided with `StreamRestart` first, so nobody sees half of
one answer and all of another. A request longer than the model's window is raised at once
(the turn sends less). When every pair failed, the whole chain is tried again after a
backoff (or the soonest end of a cooldown), `max_retries` times, so a chain of one behaves
as the single endpoint did before providers existed; then the call fails with the reason.

Every answer's `Usage` names its provider (the ledger prices it by provider/model); each
fall-over is one warning line and one `Failover` for whoever keeps the day's list. A chain
`restricted_to` one pair is strict: a person's `/model` choice never silently becomes
another model.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx2
import structlog

from squidd.config.providers import LOCAL_KINDS, ChainEntry
from squidd.config.sections import LLMSettings
from squidd.core.backoff import Backoff
from squidd.core.models import LLMEvent, Message, StreamRestart, TextDelta, ToolDefinition, Usage
from squidd.core.usage import Failover
from squidd.errors import (
    LLMContextOverflowError,
    LLMCredentialsError,
    LLMError,
    LLMRateLimitedError,
    LLMRejectedError,
    LLMUnavailableError,
    StorageError,
)
from squidd.llm.breaker import KeyState, ProviderState, build_providers, close_providers
from squidd.llm.health import ModelHealth
from squidd.llm.http import async_client
from squidd.llm.local import served_window
from squidd.llm.openai import RequestOptions, to_openai_message, to_openai_tool

__all__ = ["Link", "ProviderChain"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Link:
    """One pair of the chain: the provider's state and the model asked there."""

    provider: ProviderState
    model: str
    context_window: int
    vision: bool

    @property
    def label(self) -> str:
        return f"{self.provider.name}/{self.model}"


@dataclass
class _Outcome:
    """How one call went so far (a record of the call, kept by the chain's steps)."""

    reason: str = "no provider could be asked"
    kinds: set[str] = field(default_factory=set)
    """What failed: "credentials", "rejected", "unavailable"."""
    last_label: str | None = None
    retry_after: float | None = None
    answered: bool = False

    def error(self) -> LLMError:
        if self.kinds == {"credentials"}:
            return LLMCredentialsError(
                f"the model endpoint rejected the credentials: {self.reason}"
            )
        if self.kinds == {"rejected"}:
            return LLMRejectedError(f"the model endpoint refused the request: {self.reason}")
        return LLMUnavailableError(
            f"the model endpoint did not answer: {self.reason}", retry_after_s=self.retry_after
        )


class ProviderChain:
    """`LLMPort` over the chain of provider/model pairs (see the module)."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        http_client: httpx2.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
        on_failover: Callable[[Failover], Awaitable[None]] | None = None,
        providers: dict[str, ProviderState] | None = None,
    ) -> None:
        """`providers`: the daemon's providers when several agents' chains share them (one
        breaker and one set of keys per provider, whichever agent asks); else made here."""
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._on_failover = on_failover
        self._backoff = Backoff(settings.retry_base_delay_s, settings.retry_max_delay_s)
        self._options = RequestOptions(settings.temperature, settings.max_tokens)
        self._legacy = not settings.providers
        self._owns_providers = providers is None
        states = providers if providers is not None else build_providers(settings, http_client)
        self.providers: dict[str, ProviderState] = states
        self.links: tuple[Link, ...] = tuple(
            _link(entry, states) for entry in settings.resolved_chain()
        )
        self.entries: tuple[ChainEntry, ...] = tuple(settings.resolved_chain())
        self.failovers: list[Failover] = []
        head = self.links[0]
        # One health for the chain and every view of it (`restricted_to` shares it).
        self.health = ModelHealth(base_url=head.provider.base_url, model=head.model)

    async def aclose(self) -> None:
        """Close the providers' clients, when this chain made them."""
        if self._owns_providers:
            await close_providers(self.providers)

    # --- what people choose from ---------------------------------------------------------

    @property
    def models(self) -> list[str]:
        """The pairs a person may choose with `/model`: bare model names for a config without
        providers (as before), else provider/model."""
        return [link.model if self._legacy else link.label for link in self.links]

    def restricted_to(self, choice: str) -> ProviderChain:
        """This chain (same providers, same state) asking only `choice`: a person's strict
        `/model` choice. `choice` is a name from `models`, or a bare model name."""
        view = _copy(self)
        chosen = (
            tuple(link for link in self.links if choice in (link.label, link.model))
            or self.links[:1]
        )
        view.links = chosen
        return view

    @property
    def context_window(self) -> int:
        """The prompt budget's window: the smallest of the chain's (any pair may have to
        take a turn over), each the smaller of the configured and the served one."""
        return min(_window(link) for link in self.links)

    @property
    def vision(self) -> bool:
        return all(link.vision for link in self.links)

    async def learn_windows(self) -> None:
        """Ask each local server (ollama, llamacpp, vllm) what context it really serves for
        the chain's models; `context_window` then takes the smaller of that and the
        configured one. A server that does not answer keeps the configured window (and
        `doctor` says so)."""
        asked = [link for link in self.links if link.provider.kind in LOCAL_KINDS]
        if not asked:
            return
        timeout = httpx2.Timeout(self._settings.connect_timeout_s * 2)
        async with async_client(timeout=timeout) as client:
            for link in asked:
                state = link.provider
                key = state.keys[0].secret if state.keys else None
                served = await served_window(
                    state.kind, state.root_url, link.model, client=client, api_key=key
                )
                state.windows[link.model] = (served.tokens, served.source)
                cut = served.tokens is not None and served.tokens < link.context_window
                (log.warning if cut else log.info)(
                    "llm_window",
                    model=link.label,
                    served=served.tokens,
                    configured=link.context_window,
                    source=served.source,
                    note="the prompt budget follows the served window" if cut else None,
                )

    # --- a call --------------------------------------------------------------------------

    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> AsyncIterator[LLMEvent]:
        """The reply's events, from the first pair that answers (see the module)."""
        payload = [to_openai_message(m) for m in messages]
        tool_payload = [to_openai_tool(t) for t in tools]
        outcome = _Outcome()
        floor = self._clock()
        for round_ in range(self._settings.max_retries + 1):
            async for event in self._round(payload, tool_payload, outcome, floor):
                yield event
            if outcome.answered:
                return
            if round_ == self._settings.max_retries:
                break
            delay = self._wait_before(round_, outcome, floor)
            if delay is None:
                break
            log.warning(
                "llm_retry", attempt=round_ + 1, reason=outcome.reason, retry_in_s=round(delay, 2)
            )
            await self._sleep(delay)
            floor = max(self._clock(), self._now(floor) + delay)
        error = outcome.error()
        self.health.failed(str(error))
        raise error

    def _now(self, floor: float) -> float:
        # Within one call, time slept counts even under a test's instant sleep.
        return max(self._clock(), floor)

    def _wait_before(self, round_: int, outcome: _Outcome, floor: float) -> float | None:
        """The wait before the chain is tried again: a backoff, or until the first provider
        is free again; None when that is further off than a retry waits."""
        if outcome.kinds and outcome.kinds <= {"credentials", "rejected"}:
            return None  # no wait makes a refused key or a refused request answer
        now = self._now(floor)
        free = min(link.provider.free_at(now) for link in self.links) - now
        delay = max(self._backoff.delay(round_ + 1) if free <= 0 else 0.0, free)
        if outcome.retry_after is not None:
            delay = max(delay, min(outcome.retry_after, self._backoff.maximum_s))
        return None if delay > self._backoff.maximum_s else delay

    async def _round(
        self,
        payload: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        outcome: _Outcome,
        floor: float,
    ) -> AsyncIterator[LLMEvent]:
        """Each pair once, from the head, until one answers (`outcome.answered`)."""
        for link in self.links:
            state = link.provider
            used: set[int] = set()  # the keys this pair was asked with this round
            while (key := state.take_key(self._now(floor), outcome, used)) is not None:
                used.add(key.number)
                if outcome.last_label is not None and outcome.last_label != link.label:
                    await self._fell_over(outcome.last_label, link.label, outcome.reason)
                outcome.last_label = link.label
                streamed = False
                state.calls += 1
                try:
                    async for event in key.client.stream(link.model, payload, tools, self._options):
                        if isinstance(event, TextDelta):
                            streamed = True
                        elif isinstance(event, Usage):
                            event = dataclasses.replace(event, provider=state.name)
                        yield event
                except LLMContextOverflowError:
                    state.released(outcome)
                    raise  # the request's size, not the endpoint's health: the turn sends less
                except LLMError as exc:
                    if streamed:
                        yield StreamRestart(str(exc))
                    if not self._failed(link, key, exc, outcome, floor):
                        break  # this pair is done for this round; the next one
                else:
                    state.succeeded(key)
                    self.health.succeeded(link.model if self._legacy else link.label)
                    outcome.answered = True
                    return

    def _failed(
        self, link: Link, key: KeyState, exc: LLMError, outcome: _Outcome, floor: float
    ) -> bool:
        """Record why `key` failed at `link`; True when another key of it may be tried."""
        state, now, reason = link.provider, self._now(floor), str(exc)
        outcome.reason = f"{link.label}: {reason}"
        if isinstance(exc, LLMCredentialsError):
            outcome.kinds.add("credentials")
            tell, cooled = state.refused(key, reason, now)
            if tell:
                log.error(
                    "llm_key_refused",
                    provider=state.name,
                    key=f"key {key.number}",
                    reason=reason,
                    fix=f"replace key {key.number} of provider {state.name}",
                )
            if cooled:
                self._cooling(state, now)
            return not cooled
        if isinstance(exc, LLMUnavailableError):
            outcome.kinds.add("unavailable")
            _note_wait(outcome, exc.retry_after_s)
            if isinstance(exc, LLMRateLimitedError):
                if state.rate_limited(key, reason, exc.retry_after_s, quota=exc.quota, now=now):
                    self._cooling(state, now)
                    return False
                if any(k.usable(now) and k is not key for k in state.keys):
                    return True  # the next key, at once
            if state.failed(reason, exc.retry_after_s, now):
                self._cooling(state, now)
            return False
        outcome.kinds.add("rejected")
        state.released(outcome)
        log.warning("llm_model_failed", model=link.label, reason=reason)
        return False

    def _cooling(self, state: ProviderState, now: float) -> None:
        log.warning(
            "llm_provider_cooling",
            provider=state.name,
            seconds=round(max(0.0, state.cooling_until - now), 1),
            reason=state.reason,
        )

    async def _fell_over(self, from_: str, to: str, reason: str) -> None:
        log.warning(
            "llm_failover",
            from_=from_,
            to=to,
            reason=reason,
            note="the prompt cache does not carry over: this call's prompt is read in full",
        )
        failover = Failover(datetime.now(UTC).isoformat(timespec="seconds"), from_, to, reason)
        self.failovers = [*self.failovers[-99:], failover]
        if self._on_failover is not None:
            try:
                await self._on_failover(failover)
            except StorageError as exc:  # the list of the day is for people; the call goes on
                log.warning("failover_not_recorded", reason=str(exc))

    # --- what people see ---------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The model's health with each provider's state and the recent fall-overs."""
        now = self._clock()
        return {
            **self.health.snapshot(),
            "chain": [link.label for link in self.links],
            "context_window": self.context_window,
            "providers": [state.snapshot(now) for state in self.providers.values()],
            "failovers": [dataclasses.asdict(f) for f in self.failovers[-20:]],
        }


def _note_wait(outcome: _Outcome, wait: float | None) -> None:
    if wait is not None:
        outcome.retry_after = (
            wait if outcome.retry_after is None else min(outcome.retry_after, wait)
        )


def _window(link: Link) -> int:
    served, _ = link.provider.windows.get(link.model, (None, ""))
    return link.context_window if served is None else min(served, link.context_window)


def _copy(chain: ProviderChain) -> ProviderChain:
    view = ProviderChain.__new__(ProviderChain)
    view.__dict__.update(chain.__dict__)
    return view


def _link(entry: ChainEntry, states: dict[str, ProviderState]) -> Link:
    return Link(
        provider=states[entry.provider.name],
        model=entry.model,
        context_window=entry.context_window,
        vision=entry.vision,
    )
