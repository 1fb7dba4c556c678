"""Matrix streaming by edits at the default pacing: edits and homeserver requests per
streamed answer, against Synapse's default `rc_message` (0.2 events/s after a burst of 10).

The channel's own `Pacer` and `ReplyStream` run on a simulated clock while a model writes an
answer at a given speed, each edit paid from the account's `RateBudget` as in the channel
(an edit it cannot afford is skipped); every event they send is one homeserver request (a
`PUT .../send`; the final edit is counted too). The bound is checked the way Synapse's
limiter does: the events sent by time t must stay within burst + rate x t. The test against
a real Synapse with its default limits is tests/channels/matrix/test_streaming.py.

`python bench/bench_stream.py` prints one line per answer shape.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from squidd.channels.matrix.rate import Priority, RateBudget
from squidd.channels.matrix.stream import Pacer, ReplyStream, StreamRecords
from squidd.config.matrix import MatrixSettings

RATE, BURST = 0.2, 10  # Synapse's default rc_message


@dataclass
class Result:
    chars: int
    seconds: float
    edits: int
    requests: int
    peak: float  # most of the burst in use at once (events - rate x t), bound: BURST
    skipped: int  # edits the budget could not afford at once
    spent_before: int = 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def stream(
    chars: int, chars_per_s: float, piece: int, root: Path, spent_before: int = 0
) -> Result:
    """One answer; `spent_before` events of the burst were sent just before it (a busy
    conversation: 👀 on a burst of messages, the reactions of the previous answer)."""
    clock = Clock()
    sent_at: list[float] = [0.0] * spent_before
    budget = RateBudget(RATE, BURST, monotonic=clock)
    for _ in range(spent_before):
        await budget.take(Priority.REACTION)

    async def send(content: dict[str, Any], tx_id: str) -> str:
        async with budget.spend(Priority.EDIT):
            sent_at.append(clock.now)
        return "$first"

    reply = ReplyStream(
        key=f"matrix:${chars}-{chars_per_s}",
        room_id="!r:x",
        records=StreamRecords(root),
        pacer=Pacer(MatrixSettings(), clock),
        render=lambda text: {"msgtype": "m.text", "body": text},
        send_first=send,
        send_edit=send,
    )
    for end in range(piece, chars + piece, piece):
        clock.now = end / chars_per_s
        await reply.text("x" * min(end, chars))
    await budget.take(Priority.REPLY)  # the final edit, the reply itself
    sent_at.append(clock.now)
    peak = max(i + 1 - RATE * t for i, t in enumerate(sent_at))
    requests = len(sent_at) - spent_before
    return Result(chars, clock.now, requests - 2, requests, peak, reply.skipped, spent_before)


async def main() -> list[Result]:
    shapes = [(500, 40.0), (2_000, 80.0), (2_000, 20.0), (6_000, 40.0), (20_000, 60.0)]
    with tempfile.TemporaryDirectory() as tmp:
        results = [await stream(c, s, 8, Path(tmp)) for c, s in shapes]
        results.append(await stream(2_000, 80.0, 8, Path(tmp), spent_before=7))
        return results


def measure() -> list[Result]:
    return anyio.run(main)


if __name__ == "__main__":
    print(f"Synapse default rc_message: {RATE} events/s after a burst of {BURST}")
    for r in measure():
        print(
            f"{r.chars:>6} chars over {r.seconds:5.1f} s: {r.edits:>2} edits + first + final"
            f" = {r.requests:>2} requests; burst in use at most {r.peak:.1f} of {BURST}"
            f" -> {'within' if r.peak <= BURST else 'OVER'};"
            f" {r.skipped} text pieces left to a later edit"
            + (f" ({r.spent_before} events just before)" if r.spent_before else "")
        )
