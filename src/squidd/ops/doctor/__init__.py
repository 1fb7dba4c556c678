"""`squidd doctor`'s checks: one `Check` per thing a newcomer could have got wrong.

Each check says ✓ or ✗ and, when ✗, the fix in words; a check that cannot run because an
earlier one failed (no Matrix login, so no room list) is skipped, not failed, so one wrong
setting shows as one ✗. The checks of the machine (config, data dir, disk, modes, the
daemon, systemd) live in `local`, those of the servers (LLM, Matrix, mail, MCP) in
`services`; both only read, send nothing a person would see, and never open the running
daemon's Matrix crypto store (what only the daemon knows comes over its status socket).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Check", "Outcome", "attempt"]


class Outcome(enum.Enum):
    OK = "ok"
    FAIL = "fail"
    SKIP = "skip"


MARKS = {Outcome.OK: "✓", Outcome.FAIL: "✗", Outcome.SKIP: "-"}


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    outcome: Outcome
    detail: str
    fix: str = ""

    @classmethod
    def ok(cls, name: str, detail: str) -> Check:
        return cls(name, Outcome.OK, detail)

    @classmethod
    def fail(cls, name: str, detail: str, fix: str) -> Check:
        return cls(name, Outcome.FAIL, detail, fix)

    @classmethod
    def skip(cls, name: str, why: str) -> Check:
        return cls(name, Outcome.SKIP, why)

    @property
    def failed(self) -> bool:
        return self.outcome is Outcome.FAIL

    def line(self) -> str:
        text = f"{MARKS[self.outcome]} {self.name}: {self.detail}"
        return f"{text}\n    fix: {self.fix}" if self.fix else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.outcome.value,
            "detail": self.detail,
            "fix": self.fix,
        }


async def attempt(
    name: str,
    step: Callable[[], Awaitable[Check]],
    fix: Callable[[Exception], str],
    errors: tuple[type[Exception], ...],
) -> Check:
    """Run one check; an expected failure (`errors`) becomes a ✗ with `fix(exc)`."""
    try:
        return await step()
    except errors as exc:
        return Check.fail(name, _short(exc), fix(exc))


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"
