"""Each provider's state between calls: its keys (which one to use next, which are resting
or refused) and its circuit breaker (how long it is left alone after failing).

The rules, the shape the peers converged on:
- a 5xx, a timeout, a connection error or a broken stream counts one failure; after
  `failures_to_cool` in a row the provider cools down for `cooldown_s` (or for the wait the
  server named in `Retry-After` or a rate-limit reset header, whichever is given);
- a cooling provider gets no request; once its time is up, one call probes it (the others
  keep passing it by while the probe runs): an answer closes the breaker, a failure opens it
  again at once;
- a 429 rests the key that got it (for the named wait, else the cooldown) and the next
  key is used at once, the least recently failed first; a spent quota rests it for the
  cooldown; a refused key (401/403) is set aside until the provider's cooldown has passed,
  and the operator is told once per key. With no key left the provider cools down.

Times are monotonic seconds from the chain's clock; each state's `snapshot` gives the wall
time of the end of a cooldown for people. Keys are named by their place ("key 2"), never
by their value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
from pydantic import SecretStr

from squidd.config.providers import ProviderKind, ProviderSettings
from squidd.config.sections import LLMSettings
from squidd.llm.local import openai_base
from squidd.llm.openai import EndpointClient

__all__ = ["KeyState", "ProviderState", "build_providers", "close_providers"]

_NEVER = float("-inf")


@dataclass
class KeyState:
    """One API key of a provider (or the one keyless client of a local server)."""

    number: int
    client: EndpointClient
    secret: str | None = field(default=None, repr=False)
    last_failed: float = _NEVER
    resting_until: float = _NEVER
    refused: bool = False
    reason: str | None = None
    told: bool = False

    def usable(self, now: float) -> bool:
        return not self.refused and now >= self.resting_until

    def snapshot(self, now: float, wall: datetime) -> dict[str, Any]:
        if self.refused:
            state = "refused"
        elif now < self.resting_until:
            state = f"resting until {_at(wall, self.resting_until - now)}"
        else:
            state = "ok"
        return {"key": f"key {self.number}", "state": state, "reason": self.reason}


@dataclass
class ProviderState:
    """One provider's keys and breaker (see the module)."""

    name: str
    kind: ProviderKind
    base_url: str
    keys: list[KeyState]
    cooldown_s: float
    failures_to_cool: int
    failures: int = 0
    cooling_until: float = _NEVER
    probing: bool = False
    reason: str | None = None
    calls: int = 0
    answers: int = 0
    root_url: str = ""
    """Where the server's own API is (a local server's root), for asking its windows."""
    windows: dict[str, tuple[int | None, str]] = field(default_factory=dict)
    """Per model: the context the server says it serves (None: it does not say) and where
    that came from, as asked at start (llm/local.py)."""
    _probe_owner: object | None = field(default=None, repr=False)

    # --- choosing -----------------------------------------------------------------------

    def free_at(self, now: float) -> float:
        """When this provider may next be asked: `now` when it may be asked now."""
        if self.probing:
            return float("inf")
        usable = [k for k in self.keys if not k.refused]
        soonest_key = min((k.resting_until for k in usable), default=float("inf"))
        return max(now, self.cooling_until, soonest_key)

    def take_key(self, now: float, call: object, tried: set[int]) -> KeyState | None:
        """The key for `call`'s next request here (not one in `tried`, the numbers it used
        this round), or None: cooling down, being probed by another call, or no key left.
        A call after a cooldown becomes the probe."""
        if self.probing and self._probe_owner is not call:
            return None
        if now < self.cooling_until:
            return None
        if self.cooling_until != _NEVER and not self.probing:
            self.probing, self._probe_owner = True, call
            for key in self.keys:  # a probe tries the set-aside keys again
                key.refused = False
        usable = [k for k in self.keys if k.usable(now) and k.number not in tried]
        if not usable:
            return None
        return min(usable, key=lambda k: (k.last_failed, k.number))

    # --- outcomes -----------------------------------------------------------------------

    def succeeded(self, key: KeyState) -> None:
        self.failures, self.cooling_until, self.reason = 0, _NEVER, None
        self.probing, self._probe_owner = False, None
        key.reason = None
        self.answers += 1

    def failed(self, reason: str, retry_after: float | None, now: float) -> bool:
        """A failure of the provider (not of a key); True when it now cools down."""
        self.failures += 1
        self.reason = reason
        if self.probing or retry_after is not None or self.failures >= self.failures_to_cool:
            self._cool(now, retry_after)
            return True
        return False

    def rate_limited(
        self, key: KeyState, reason: str, retry_after: float | None, *, quota: bool, now: float
    ) -> bool:
        """A 429 on `key`: it rests for the named wait (a spent quota: the cooldown), else
        it only goes to the back of the line. True when no key is left to rest on and the
        provider cools down."""
        key.last_failed, key.reason = now, reason
        if quota or retry_after is not None:
            key.resting_until = now + (self.cooldown_s if quota else float(retry_after or 0))
            return self._out_of_keys(reason, now)
        return False

    def refused(self, key: KeyState, reason: str, now: float) -> tuple[bool, bool]:
        """401/403 on `key`: (whether to tell the operator now, whether the provider now
        cools down for want of a key)."""
        key.refused, key.last_failed, key.reason = True, now, reason
        tell = not key.told
        key.told = True
        return tell, self._out_of_keys(reason, now)

    def released(self, call: object) -> None:
        """`call` is done with this provider (a probe that ended without an outcome, e.g.
        the model refused the request: the provider itself is fine)."""
        if self._probe_owner is call:
            self.probing, self._probe_owner = False, None
            self.cooling_until = _NEVER

    def _out_of_keys(self, reason: str, now: float) -> bool:
        if any(k.usable(now) for k in self.keys):
            return False
        self.reason = reason
        resting = [k.resting_until for k in self.keys if not k.refused]
        until = min(resting) if resting else now + self.cooldown_s
        self.cooling_until = max(until, now)
        self.probing, self._probe_owner = False, None
        return True

    def _cool(self, now: float, retry_after: float | None) -> None:
        wait = self.cooldown_s if retry_after is None else retry_after
        self.cooling_until = now + wait
        self.probing, self._probe_owner = False, None

    # --- showing ------------------------------------------------------------------------

    def state(self, now: float) -> str:
        if self.keys and all(k.refused for k in self.keys):
            return "key refused"
        if now < self.cooling_until:
            return "cooling down"
        if self.failures:
            return "failing"
        return "ok"

    def snapshot(self, now: float) -> dict[str, Any]:
        wall = datetime.now(UTC)
        cooling = now < self.cooling_until
        return {
            "name": self.name,
            "kind": self.kind,
            "base_url": self.base_url,
            "state": self.state(now),
            "cooling_until": _at(wall, self.cooling_until - now) if cooling else None,
            "reason": self.reason,
            "failures_in_a_row": self.failures,
            "calls": self.calls,
            "answers": self.answers,
            "windows": {
                model: {"served": tokens, "source": source}
                for model, (tokens, source) in self.windows.items()
            },
            "keys": [key.snapshot(now, wall) for key in self.keys] if self.keys else [],
        }


def _at(wall: datetime, seconds_from_now: float) -> str:
    return (wall + timedelta(seconds=max(0.0, seconds_from_now))).isoformat(timespec="seconds")


def build_providers(
    settings: LLMSettings, http_client: httpx2.AsyncClient | None = None
) -> dict[str, ProviderState]:
    """Each provider's state and clients, by name. Each endpoint client keeps the SDK's own
    connection pool (sized for many turns at once) unless one is handed in (the tests')."""
    return {
        p.name: _provider_state(p, settings, http_client) for p in settings.resolved_providers()
    }


async def close_providers(providers: dict[str, ProviderState]) -> None:
    for state in providers.values():
        for key in state.keys:
            await key.client.aclose()


def _provider_state(
    provider: ProviderSettings, settings: LLMSettings, http_client: httpx2.AsyncClient | None
) -> ProviderState:
    base = openai_base(provider.kind, provider.base_url)
    timeout = provider.timeout_s or settings.timeout_s
    connect = provider.connect_timeout_s or settings.connect_timeout_s
    secrets: list[SecretStr | None] = [*provider.keys] or [None]
    keys = [
        KeyState(
            number=i + 1,
            secret=None if secret is None else secret.get_secret_value(),
            client=EndpointClient(
                base,
                None if secret is None else secret.get_secret_value(),
                timeout_s=timeout,
                connect_timeout_s=connect,
                http_client=http_client,
            ),
        )
        for i, secret in enumerate(secrets)
    ]
    return ProviderState(
        name=provider.name,
        kind=provider.kind,
        base_url=base,
        root_url=provider.base_url,
        keys=keys,
        cooldown_s=provider.cooldown_s or settings.cooldown_s,
        failures_to_cool=settings.failures_to_cool,
    )
