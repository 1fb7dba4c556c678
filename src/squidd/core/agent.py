"""AgentLoop: one turn of conversation with tools.

`run()` drives the named steps of a Turn (core/turns.py): it reads the session's history
window once and returns the reply already given when the same message was answered before;
otherwise `prepare` (tools: per-call `extra_tools` first, then the registry; the context
built through the MemoryManager; attachments), then rounds (request, the model's answer, the
tool calls it asks for) until the model answers without tools or a loop breaker
(core/loop_guard.py) asks it for a final answer without tools, one retry of a round after a
context overflow, and `finish`, which appends the whole turn to the session's history once.
A tool that fails or gets bad arguments becomes an error result the model sees; it never
escapes the loop.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from squidd.core.approvals import Approvals
from squidd.core.audit import Auditor
from squidd.core.memory import MemoryManager
from squidd.core.models import Attachment, SessionId
from squidd.core.ports import AttachmentReader, LLMPort, PromptSource, ResultStore, Tool, ToolPolicy
from squidd.core.resume import TurnRecording
from squidd.core.tool_calls import DEFAULT_MAX_RESULT_CHARS
from squidd.core.tools import ToolRegistry
from squidd.core.turns import OnEvent, TurnInput, TurnLimits, TurnSteps
from squidd.core.usage import UsageSink
from squidd.errors import LLMContextOverflowError

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "AgentLoop", "OnEvent"]


class AgentLoop:
    def __init__(
        self,
        *,
        llm: LLMPort,
        memory: MemoryManager,
        registry: ToolRegistry,
        prompt: PromptSource,
        max_tool_rounds: int = 20,
        max_repeated_tool_calls: int = 3,
        max_turn_seconds: float = 600.0,
        monotonic: Callable[[], float] = time.monotonic,
        on_demand: Sequence[str] = (),
        policy: ToolPolicy | None = None,
        usage: UsageSink | None = None,
        results: ResultStore | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        attachments: AttachmentReader | None = None,
        prompt_parts: Callable[[], Awaitable[Sequence[str]]] | None = None,
        recording: TurnRecording | None = None,
        auditor: Auditor | None = None,
        approvals: Approvals | None = None,
    ) -> None:
        # `prompt_parts` gives the system prompt parts of every turn that have their own
        # cap (the skills index); they come before a run's own `extra_parts`. `recording`:
        # the journal turns with a `turn_id` record in and resume from (core/journal.py).
        self._llm = llm
        self._memory = memory
        self._steps = TurnSteps(
            memory=memory,
            registry=registry,
            prompt=prompt,
            limits=TurnLimits(
                max_tool_rounds=max_tool_rounds,
                max_repeated_tool_calls=max_repeated_tool_calls,
                max_turn_seconds=max_turn_seconds,
                monotonic=monotonic,
            ),
            prompt_parts=prompt_parts,
            attachments=attachments,
            policy=policy,
            on_demand=on_demand,
            usage=usage,
            results=results,
            max_result_chars=max_result_chars,
            recording=recording,
            auditor=auditor,
            approvals=approvals,
        )

    async def run(
        self,
        session: SessionId,
        user_message: str,
        channel: str,
        *,
        llm: LLMPort | None = None,
        extra_tools: Sequence[Tool] | None = None,
        on_event: OnEvent | None = None,
        turn_id: str | None = None,
        max_tool_rounds: int | None = None,
        purpose: str | None = None,
        extra_parts: Sequence[str] = (),
        attachments: Sequence[Attachment] = (),
    ) -> str:
        """Answer `user_message` in `session`; return the final reply text.

        `purpose` files every model call of the turn under it in the usage ledger (a
        sub-agent passes "sub_agent", the gateway "cron" or "heartbeat" for those runs);
        by default it follows the round ("turn", then "tool_step").
        `extra_parts` join the system prompt under their own cap (a skills index).
        `attachments` (references into the media store) are read for the model by the
        attachment reader (images, extracted text, transcripts) for this turn; the history
        keeps the references and the short notes, not the files' content.

        `turn_id` names the inbound message answered (stable across redeliveries): when the
        history already holds a finished turn for it, that reply is returned as it is; when
        its journal holds the steps of a turn cut short, the turn resumes from them.
        Raises `LLMError` when the model cannot answer; the user message is still kept in
        the session's history then (as it is when anything else breaks the turn).
        `max_tool_rounds` lowers the round limit for this turn (a sub-agent's step cap).
        """
        ask = TurnInput(
            session=session,
            user_message=user_message,
            channel=channel,
            model=llm if llm is not None else self._llm,
            extra_tools=extra_tools or (),
            on_event=on_event,
            turn_id=turn_id,
            max_tool_rounds=max_tool_rounds,
            purpose=purpose,
            extra_parts=extra_parts,
            attachments=attachments,
        )
        steps = self._steps
        window = await self._memory.load_window(session)
        previous = steps.previous_reply(ask, window)
        if previous is not None:
            return previous
        turn = await steps.prepare(ask, window)
        try:
            while not turn.done:
                try:
                    await steps.round(turn)
                except LLMContextOverflowError:
                    if not await steps.retry_overflow(turn):
                        raise
        except Exception as exc:  # kept the user message, then re-raised: nothing is lost
            await steps.fail(turn, exc)
            raise
        return await steps.finish(turn)
