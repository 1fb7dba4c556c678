"""Loaded by Python at the start of a `squidd` child whose `PYTHONPATH` names this folder
(tests/support/crash_points.py sets it): with `TEST_CRASH_AFTER` set to a kill point, the
process SIGKILLs itself the moment that step is durable. The daemon's own code knows
nothing of it; the fault tests stop a real daemon at an exact step from outside.

Kill points: "answer", "start", "result" (right after the first turn-journal record of that
kind), "outbox" (right after a turn's reply is stored for delivery, before it is sent).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from typing import Any

POINT = os.environ.get("TEST_CRASH_AFTER", "")


def _die(after: str) -> None:
    sys.stderr.write(f"test crash after {after}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _install() -> None:
    from squidd.store.journal import JournalDir
    from squidd.store.outbox import OutboxDir

    append, put = JournalDir._append, OutboxDir.put

    @functools.wraps(append)
    async def append_then_die(self: JournalDir, key: str, kind: str, **fields: Any) -> None:
        await append(self, key, kind, **fields)
        if kind == POINT:
            _die(kind)

    @functools.wraps(put)
    async def put_then_die(self: OutboxDir, *args: Any, **kwargs: Any) -> None:
        await put(self, *args, **kwargs)
        if POINT == "outbox":
            _die("outbox")

    JournalDir._append = append_then_die  # type: ignore[method-assign]
    OutboxDir.put = put_then_die  # type: ignore[method-assign]


if POINT:
    _install()
