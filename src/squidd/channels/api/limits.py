"""The API's request rate limit: a token bucket per key, in memory.

Each key may make `per_minute` requests a minute, in bursts of up to that many; past it a
request is refused with 429 and told (Retry-After) how many seconds until one more is
allowed. The buckets are few (one per key in the keys file), so they are never pruned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class RateLimit:
    def __init__(self, per_minute: int, *, now: Callable[[], float] = time.monotonic) -> None:
        self._capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._now = now
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> int:
        """0 when `key` may make a request now (one is used up), else the seconds to wait."""
        now = self._now()
        tokens, then = self._buckets.get(key, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - then) * self._rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0
        self._buckets[key] = (tokens, now)
        return max(1, math.ceil((1.0 - tokens) / self._rate))
