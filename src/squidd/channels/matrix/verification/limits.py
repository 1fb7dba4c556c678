"""How much of the bot a stream of verification events may take: anyone can send to-device
events to the bot's device, as many as the homeserver lets them, in any order.

* flows kept: at most `MAX_LIVE_FLOWS` in progress, `MAX_LIVE_PER_USER` of one person, and
  `MAX_KEPT_FLOWS` in all (finished ones are dropped oldest first to make room);
* answers to events that start nothing (a stranger's request, a step of a flow the bot does
  not know): a `Budget` per sender and one for everyone together, so a flood is answered
  with a few cancels, not one per event; a sender over budget is ignored (logged at debug).
"""

from __future__ import annotations

from collections import OrderedDict

MAX_LIVE_FLOWS = 16
MAX_LIVE_PER_USER = 4
MAX_KEPT_FLOWS = 64
SENDERS_REMEMBERED = 512


class Budget:
    """At most `burst` answers per `window_s` seconds to each key; the `SENDERS_REMEMBERED`
    keys answered most recently are remembered (an older one starts afresh)."""

    def __init__(self, burst: int, window_s: float) -> None:
        self._burst = burst
        self._window_s = window_s
        self._spent: OrderedDict[str, list[float]] = OrderedDict()

    def allow(self, key: str, now: float) -> bool:
        """True (and counted) if `key` may get one more answer now."""
        recent = [t for t in self._spent.pop(key, []) if now - t < self._window_s]
        allowed = len(recent) < self._burst
        if allowed:
            recent.append(now)
        self._spent[key] = recent
        while len(self._spent) > SENDERS_REMEMBERED:
            self._spent.popitem(last=False)
        return allowed

    def __len__(self) -> int:
        return len(self._spent)


class Answers:
    """The budgets of the cancels that answer unasked-for events: a stranger's (one a
    minute each, twenty a minute in all) and a known person's unknown flows (more lenient:
    her client may have several flows that a restart forgot)."""

    def __init__(self) -> None:
        self._stranger = Budget(1, 60.0)
        self._strangers = Budget(20, 60.0)
        self._unknown = Budget(10, 60.0)

    def stranger(self, sender: str, now: float) -> bool:
        return self._stranger.allow(sender, now) and self._strangers.allow("*", now)

    def unknown_flow(self, sender: str, now: float) -> bool:
        return self._unknown.allow(sender, now)

    def remembered(self) -> int:
        return len(self._stranger) + len(self._strangers) + len(self._unknown)
