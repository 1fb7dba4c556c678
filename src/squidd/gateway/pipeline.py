"""The pipeline: what happens to a channel's message before its session's queue.

A channel's receive loop hands each message to its `Pipeline`, an `Inbox` that runs an
ordered list of stages (`core.ports.Stage`), then the router's inbox. The order is set in
one place, `gateway/build.py` (`stages_for`), and is:

1. approval answers (gateway/approval_answers.py): a reply to an open question (`/approve
   <id>`, "yes", "no", a reaction) and `/approvals` while one waits are taken here; the
   turn that waits for the answer holds the session's place in line;
2. `/stop` (gateway/conversations.py): cancels the conversation's running turn as it
   arrives, then goes on to be answered in line like every command;
3. the channel's own stages (`core.ports.HasStages`; Matrix: a thread's root text);
4. bursts (gateway/bursts.py), where the channel declares a quiet window
   (`core.ports.HasQuietWindow`): quick messages, and those that come during the
   conversation's turn, held and handed on as one.

Whatever takes an answer or a `/stop` comes before any stage that holds a message, so
neither ever waits behind the turn it is for. The other chat commands are answered in the
line (gateway/turn_runner.py); a stage asks core/command_words.py what is a command.

A pipeline lives as long as the daemon, not as one connection of its channel: what a stage
holds when the channel's receive loop restarts is handed on all the same, and acknowledged
once answered (a Matrix event through the channel's sync ledger, which outlives its
connections too).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from squidd.core.models import Inbound
from squidd.core.poison import PoisonGuard
from squidd.core.ports import ChannelState, Inbox, Stage

__all__ = ["Pipeline"]

log = structlog.get_logger()


class Pipeline:
    """A channel's inbox: `stages` in order, then `inner` (the router's inbox)."""

    def __init__(self, stages: Sequence[Stage], inner: Inbox) -> None:
        self.stages: tuple[Stage, ...] = tuple(stages)
        self._inner = inner
        self._tg: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the task group of what the stages hold; runs until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    async def put(self, message: Inbound) -> None:
        await self._from(0, message)

    async def _from(self, index: int, message: Inbound) -> None:
        if index == len(self.stages):
            await self._inner.put(message)
            return

        async def then(onward: Inbound) -> None:
            await self._from(index + 1, onward)

        await self.stages[index].take(message, then, self._later)

    def _later(self, work: Callable[[], Awaitable[None]]) -> None:
        if self._tg is None:
            raise RuntimeError("the pipeline holds nothing before it runs")
        self._tg.start_soon(_guarded, work)

    def report(self, state: ChannelState, detail: str = "") -> None:
        self._inner.report(state, detail)

    @property
    def poison(self) -> PoisonGuard:
        return self._inner.poison


async def _guarded(work: Callable[[], Awaitable[None]]) -> None:
    """A stage's waiting work; its failure is logged and leaves its messages unacknowledged
    (their source delivers them again), never stopping the pipeline."""
    try:
        await work()
    except Exception:
        log.exception("pipeline_stage_failed")
