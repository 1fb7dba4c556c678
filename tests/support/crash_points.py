"""The environment of a `squidd` child that SIGKILLs itself at a kill point (see
tests/support/crash_hook/sitecustomize.py), or of a plain child when `point` is empty."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.daemon import daemon_env

HOOK = Path(__file__).resolve().parent / "crash_hook"
POINTS = ("answer", "start", "result", "outbox")


def crash_env(point: str = "", **extra: str) -> dict[str, str]:
    if not point:
        return daemon_env(**extra)
    if point not in POINTS:
        raise ValueError(f"unknown kill point {point!r}; one of {', '.join(POINTS)}")
    env = daemon_env(**extra)
    env["PYTHONPATH"] = os.pathsep.join([str(HOOK), env["PYTHONPATH"]])
    env["TEST_CRASH_AFTER"] = point
    return env
