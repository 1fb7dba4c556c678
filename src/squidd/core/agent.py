"""AgentLoop: one turn of conversation with tools.

`run()` drives the named steps of a Turn (core/turns.py): it reads what the turn needs
once (the session's history window, the memory texts, the prompt: a `TurnReader`) and
returns the reply already given when the same message was answered before; otherwise
`prepare` (tools: per-call `extra_tools` first, then the registry; the context built
through the MemoryManager; attachments), then rounds (request, the model's answer, the tool
calls it asks for) until the model answers without tools or a loop breaker
(core/loop_guard.py) asks it for a final answer without tools, one retry of a round after a
context overflow, and `finish`, which appends the whole turn to the session's history once.
A tool that fails or gets bad arguments becomes an error result the model sees; it never
escapes the loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from squidd.core.models import Attachment, Inbound, SessionId
from squidd.core.ports import LLMPort, Tool
from squidd.core.tool_calls import DEFAULT_MAX_RESULT_CHARS
from squidd.core.turn_services import SeparateReads, TurnLimits, TurnServices
from squidd.core.turns import OnEvent, TurnInput, TurnSteps
from squidd.errors import LLMContextOverflowError

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "AgentLoop", "OnEvent", "TurnLimits", "TurnServices"]


class AgentLoop:
    """Runs turns with `llm` (a run may name another model client) over `services`, the
    collaborators every turn shares (core/turn_services.py)."""

    def __init__(self, *, llm: LLMPort, services: TurnServices) -> None:
        self._llm = llm
        self._memory = services.memory
        self._reader = services.reader or SeparateReads(services)
        self._steps = TurnSteps(services)

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
        asked_from: Inbound | None = None,
        person: str | None = None,
        memory_of: str | None = None,
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
        `asked_from` is the message the turn answers, where an approval question is put
        (core/approvals.py); None: no one to ask there. `person` is who asks (kept on the
        user message in the history); `memory_of` whose own MEMORY.md the prompt holds
        (memory per person; None: the shared one).
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
            asked_from=asked_from,
            person=person,
            memory_of=memory_of,
        )
        steps = self._steps
        reads = await self._reader.read(session, memory_of)
        previous = steps.previous_reply(ask, reads.window)
        if previous is not None:
            return previous
        turn = await steps.prepare(ask, reads)
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
