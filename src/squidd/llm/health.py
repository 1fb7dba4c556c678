"""The model endpoint's health as the daemon last met it: the last answer, the last failure
and why (in the words of llm/causes.py), and the one try made when the daemon starts.

`OpenAILLM` records every call's outcome here; `squidd status`, the dashboard and `doctor`
show it. In memory only: a restart starts over with the start-up try.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["ModelHealth", "model_lines"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class ModelHealth:
    """What one endpoint did lately. `state` is "ok", "failing" or "unknown" (no call yet)."""

    base_url: str = ""
    model: str = ""
    last_success: str | None = None
    last_success_model: str | None = None
    last_failure: str | None = None
    last_failure_reason: str | None = None
    start_check: dict[str, Any] | None = None

    def succeeded(self, model: str) -> None:
        self.last_success, self.last_success_model = _now(), model

    def failed(self, reason: str) -> None:
        self.last_failure, self.last_failure_reason = _now(), reason

    def checked_at_start(self, reason: str | None) -> None:
        """The start-up try: None when the endpoint answered, else why not."""
        self.start_check = {"at": _now(), "ok": reason is None, "reason": reason}
        if reason is not None:
            self.failed(reason)

    @property
    def state(self) -> str:
        if self.last_failure and (not self.last_success or self.last_failure > self.last_success):
            return "failing"
        if self.last_success or (self.start_check and self.start_check["ok"]):
            return "ok"
        return "unknown"

    def snapshot(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "base_url": self.base_url,
            "model": self.model,
            "last_success": self.last_success,
            "last_success_model": self.last_success_model,
            "last_failure": self.last_failure,
            "last_failure_reason": self.last_failure_reason,
            "start_check": self.start_check,
        }


def model_lines(model: dict[str, Any] | None) -> list[str]:
    """The model's state for a person (`squidd status`, the dashboard)."""
    if not model:
        return []
    state = {"ok": "ok", "failing": "FAILING", "unknown": "not called yet"}.get(
        str(model.get("state")), str(model.get("state"))
    )
    lines = [f"model: {model.get('model')} at {model.get('base_url')} - {state}"]
    lines.append(f"  last answer:  {model.get('last_success') or 'never'}")
    if model.get("last_failure"):
        lines.append(f"  last failure: {model['last_failure']}: {model.get('last_failure_reason')}")
    check = model.get("start_check")
    if check and not check.get("ok"):
        lines.append(f"  at start:     not reachable: {check.get('reason')}")
    return lines + provider_lines(model)


def provider_lines(model: dict[str, Any]) -> list[str]:
    """The chain and each provider's state, and the fall-overs the daemon met (newest last),
    when there is more than one pair to fall over to."""
    chain = model.get("chain") or []
    providers = model.get("providers") or []
    if len(chain) < 2 and len(providers) < 2:
        return []
    lines = [f"  chain:        {' -> '.join(chain)} (window {model.get('context_window')})"]
    for state in providers:
        text = str(state.get("state"))
        if state.get("cooling_until"):
            text += f" until {state['cooling_until']}"
        if state.get("reason") and text != "ok":
            text += f" ({state['reason']})"
        keys = state.get("keys") or []
        refused = [k["key"] for k in keys if k.get("state") != "ok"]
        if refused:
            text += f"; {', '.join(refused)} set aside"
        answers = f"{state.get('answers', 0)} answers of {state.get('calls', 0)} calls"
        lines.append(f"  provider {state.get('name')}: {text} - {answers}")
    failovers = model.get("failovers") or []
    if failovers:
        count = model.get("failovers_today", len(failovers))
        lines.append(f"  failovers today: {count}")
        lines.extend(
            f"    {f['at']}: {f['from_']} -> {f['to']} ({f['reason']})" for f in failovers[-5:]
        )
    return lines
