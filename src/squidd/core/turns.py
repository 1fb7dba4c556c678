"""A Turn and its named steps: how one message is answered, step by step.

`Turn` holds one turn's state from start to end: what was asked (`TurnInput`), the tools and
schemas offered, the prompt context, the messages of the turn as they will enter the history,
the loop guard and the round count. `TurnSteps` changes it, one named step at a time:

- `prepare`: the tools (registry, then per-call `extra_tools`, policy), the context built
  by the MemoryManager from the window read once, and the attachments read for the model;
- `round`: one request within the budget, the model's answer, then `call_tool` for each
  tool call it asks for (a loop breaker, core/loop_guard.py, ends tool calling and asks for
  a final answer without tools);
- `retry_overflow`: after a context overflow, the context is rebuilt tight (consolidated or
  trimmed) and the same round is tried once more;
- `finish`: the final reply joins the turn, which is appended to the session's history once;
  `fail` keeps the user message in the history when the turn breaks.

`AgentLoop.run` (core/agent.py) drives these steps. With a journal (core/journal.py), a
turn that asks for tools records each such answer, each call's start and each result as it
goes; a turn whose inbound comes back after a crash is resumed from those records: `prepare`
reads them, `round` takes a recorded answer instead of asking the model, and `call_tool`
uses a recorded result, or, for a call that started without a recorded result, runs it again
only when its tool may run twice, else gives the model `INTERRUPTED`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

import structlog

from squidd.core.approvals import Verdict
from squidd.core.audit import Decision
from squidd.core.budget import fit_request
from squidd.core.estimator import messages_chars
from squidd.core.journal import (
    RecordedAnswer,
    Replay,
    effect_of,
    may_rerun,
)
from squidd.core.loop_guard import LoopGuard
from squidd.core.models import (
    Attachment,
    HistoryWindow,
    Inbound,
    LLMEvent,
    Message,
    SessionId,
    TextDelta,
    ToolCall,
    ToolCallsReady,
    ToolDefinition,
    TurnReads,
    Usage,
    utcnow,
)
from squidd.core.ports import (
    LLMPort,
    Tool,
)
from squidd.core.resume import load_replay, recorded_result
from squidd.core.tool_calls import Schemas, cap_result, dispatch, offer, tools_for
from squidd.core.turn_services import TurnServices
from squidd.core.usage import record_usage

log = structlog.get_logger()

OnEvent = Callable[[LLMEvent], Awaitable[None]]


def now_iso() -> str:
    return utcnow().isoformat(timespec="seconds")


@dataclass(frozen=True)
class TurnInput:
    """What one `AgentLoop.run` call asks for (see its docstring)."""

    session: SessionId
    user_message: str
    channel: str
    model: LLMPort
    extra_tools: Sequence[Tool] = ()
    on_event: OnEvent | None = None
    turn_id: str | None = None
    max_tool_rounds: int | None = None
    purpose: str | None = None
    extra_parts: Sequence[str] = ()
    attachments: Sequence[Attachment] = ()
    asked_from: Inbound | None = None
    """The message the turn answers: where an approval question goes (core/approvals.py)."""
    person: str | None = None
    """Who asks (a person's id), recorded on the user message; None: nobody (a heartbeat)."""
    memory_of: str | None = None
    """Whose MEMORY.md the prompt holds: that person's own; None: the shared one."""


@dataclass
class Turn:
    """One turn's state; the steps of `TurnSteps` read and change it."""

    ask: TurnInput
    guard: LoopGuard
    started: float
    tools: dict[str, Tool] = field(default_factory=dict)
    definitions: list[ToolDefinition] = field(default_factory=list)
    reserved: int = 0
    base_prompt: str = ""
    extra_parts: Sequence[str] = ()
    context: list[Message] = field(default_factory=list)
    # The user message as the model sees it when attachments added their content.
    asked: Message | None = None
    # The turn as it enters the history: the user message first, then each round.
    messages: list[Message] = field(default_factory=list)
    rounds: int = 0
    stopped: str | None = None
    retried: bool = False
    request_chars: int = 0
    reply: str | None = None
    # The journal key (the turn id) when this turn records; what it recorded before.
    key: str | None = None
    replay: Replay | None = None

    @property
    def session(self) -> SessionId:
        return self.ask.session

    @property
    def done(self) -> bool:
        return self.reply is not None

    @property
    def purpose(self) -> str:
        """What this round's model call is for in the usage ledger: the caller's purpose,
        else "turn" for the first round and "tool_step" after."""
        if self.ask.purpose:
            return self.ask.purpose
        return "turn" if self.rounds == 1 else "tool_step"


class TurnSteps:
    """The named steps of a turn, over the collaborators every turn shares."""

    def __init__(self, services: TurnServices) -> None:
        self._services = services
        self._schemas = Schemas()

    def previous_reply(self, ask: TurnInput, window: HistoryWindow) -> str | None:
        """The reply of a finished turn for the same inbound (a redelivery), if any."""
        if ask.turn_id is None:
            return None
        previous = self._services.memory.finished_reply(window, ask.turn_id)
        if previous is not None:
            log.info("turn_reused", session=ask.session, channel=ask.channel, turn=ask.turn_id)
        return previous

    async def prepare(self, ask: TurnInput, reads: TurnReads) -> Turn:
        """Tools, context (from what the turn read) and attachments: the turn ready for its
        first round."""
        limits = self._services.limits
        guard = LoopGuard(
            # A sub-agent's step cap may lower the limit for its turn, never raise it.
            max_rounds=min(ask.max_tool_rounds or limits.max_tool_rounds, limits.max_tool_rounds),
            max_repeats=limits.max_repeated_tool_calls,
            max_seconds=limits.max_turn_seconds,
            monotonic=limits.monotonic,
        )
        turn = Turn(ask=ask, guard=guard, started=time.monotonic())
        turn.tools = tools_for(
            self._services.registry,
            self._services.policy,
            ask.session,
            ask.channel,
            ask.extra_tools,
        )
        turn.definitions = offer(turn.tools, self._services.on_demand, self._schemas)
        turn.reserved = self._services.memory.estimator.tokens(
            self._schemas.chars(turn.definitions)
        )
        turn.base_prompt = reads.prompt
        turn.extra_parts = [*reads.parts, *ask.extra_parts]
        turn.context = await self._services.memory.build_messages(
            ask.session,
            turn.base_prompt,
            ask.user_message,
            window=reads.window,
            reserved_tokens=turn.reserved,
            extra_parts=turn.extra_parts,
            memory_of=ask.memory_of,
            texts=(reads.global_memory, reads.summary),
        )
        kept_text = ask.user_message
        if ask.attachments and self._services.attachments is not None:
            read = await self._services.attachments.read(ask.attachments)
            kept_text = "\n\n".join(t for t in (ask.user_message, read.kept) if t)
            full_text = "\n\n".join(t for t in (ask.user_message, read.text) if t)
            turn.asked = Message(role="user", content=full_text, images=read.images)
            turn.context[-1] = turn.asked
        await self._recall_note(turn)
        turn.messages.append(
            Message(
                role="user",
                content=kept_text,
                ts=now_iso(),
                turn=ask.turn_id,
                attachments=tuple(ask.attachments),
                by=ask.person,
            )
        )
        resumed = await load_replay(self._services.recording, ask.turn_id)
        if resumed is not None:
            turn.key, turn.replay = resumed.key, resumed.replay
            turn.reply = resumed.reply if resumed.reply is not None else turn.reply
        return turn

    async def _recall_note(self, turn: Turn) -> None:
        """Recalled snippets before the message, after the stable prefix; never stored."""
        note_of, ask = self._services.recall_note, turn.ask
        if note_of and (note := await note_of(ask.session, ask.memory_of, ask.user_message)):
            asked = turn.context[-1]
            turn.asked = replace(asked, content=f"{note}\n\n{asked.content or ''}")
            turn.context[-1] = turn.asked

    async def round(self, turn: Turn) -> None:
        """One request, the model's answer, and the tool calls it asks for. An answer
        without tool calls (or any answer once tools are stopped) is the turn's reply."""
        turn.rounds += 1
        recorded: RecordedAnswer | None = None
        if turn.replay is not None and turn.stopped is None:
            recorded = turn.replay.take_answer()
        if recorded is not None:  # asked and answered before the cut: not asked again
            text, calls = recorded.text, recorded.calls
        else:
            memory = self._services.memory
            request = fit_request(
                turn.context,
                turn.messages[1:],
                turn.reserved,
                memory.budget,
                memory.estimator,
                tight=turn.retried,
            )
            offered = turn.definitions
            if turn.stopped is not None:
                # Told why, and asked for its answer: no tools are offered any more.
                prompt = turn.guard.final_prompt(turn.stopped)
                request.append(Message(role="user", content=prompt))
                offered = []
            text, calls = await self._complete(turn, request, offered)
        if not calls or turn.stopped is not None:
            turn.reply = text.strip()
            return
        if recorded is None and self._services.recording is not None and turn.key is not None:
            await self._services.recording.journal.answer(turn.key, turn.session, text, calls)
        ts = recorded.ts if recorded is not None else now_iso()
        turn.messages.append(
            Message(role="assistant", content=text or None, tool_calls=calls, ts=ts)
        )
        for call in calls:
            turn.messages.append(await self.call_tool(turn, call))
        turn.guard.note(calls)
        turn.stopped = turn.guard.reason()
        if turn.stopped is not None:
            log.warning("tool_calls_stopped", session=turn.session, reason=turn.stopped)

    async def call_tool(self, turn: Turn, call: ToolCall) -> Message:
        """Run one tool call (or take its recorded result); its result as the tool message
        that enters the turn. With a journal, its start and its result are recorded. A call
        that needs approval (core/approvals.py) is asked about first; refused, it does not
        run and the model is told why."""
        content = await recorded_result(
            self._services.recording, turn.key, turn.replay, call, turn.tools.get(call.name)
        )
        if content is None:
            recording = self._services.recording
            journal = recording.journal if recording and turn.key else None
            # Only a call that must not run twice needs its records safe from a power loss
            # before it goes on (store/journal.py); one that may run again is run again.
            durable = recording is None or not may_rerun(
                effect_of(call.name, turn.tools.get(call.name), recording.effects)
            )
            verdict = Verdict(True, Decision.ALLOWED)
            if (
                self._services.approvals is not None and call.name in turn.tools
            ):  # else not run anyway
                verdict = await self._services.approvals.gate(
                    turn.session, turn.ask.channel, turn.key, call, turn.ask.asked_from
                )
            if verdict.run:
                if journal is not None and turn.key is not None:
                    await journal.started(turn.key, call, durable=durable)
                content = await self._run_call(turn, call, verdict)
            else:
                content = f"Error: {verdict.note}"
                await self._audit(turn, call, verdict, 0.0, "", verdict.note)
            if journal is not None and turn.key is not None:
                await journal.result(turn.key, call.id, content, durable=durable)
        return Message(
            role="tool", content=content, tool_call_id=call.id, name=call.name, ts=now_iso()
        )

    async def _run_call(self, turn: Turn, call: ToolCall, verdict: Verdict) -> str:
        started = time.monotonic()
        result = await dispatch(call, turn.tools)
        error = result.content if result.is_error else None
        await self._audit(turn, call, verdict, time.monotonic() - started, result.content, error)
        content = await cap_result(
            self._services.results,
            self._services.max_result_chars,
            turn.session,
            call,
            result.content,
        )
        return f"Error: {content}" if result.is_error else content

    async def _audit(
        self,
        turn: Turn,
        call: ToolCall,
        verdict: Verdict,
        seconds: float,
        result: str,
        error: str | None,
    ) -> None:
        if self._services.auditor is None:
            return
        await self._services.auditor.record(
            turn.session,
            turn.ask.channel,
            call,
            decision=verdict.decision,
            by=verdict.by,
            seconds=seconds,
            result_chars=len(result),
            error=error,
            person=turn.ask.person,
        )

    async def retry_overflow(self, turn: Turn) -> bool:
        """After the model refused the request as too long: rebuild the context tight
        (consolidate or trim) for one more try of the same round. False when the turn has
        had its retry or no budget is configured (the overflow is then the turn's error)."""
        budget = self._services.memory.budget
        if turn.retried or budget is None:
            return False
        turn.retried = True
        self._services.memory.estimator.overflowed(turn.request_chars, budget.context_window)
        log.warning("context_overflow_retry", session=turn.session, chars=turn.request_chars)
        turn.context = await self._services.memory.build_messages(
            turn.session,
            turn.base_prompt,
            turn.ask.user_message,
            reserved_tokens=turn.reserved,
            extra_parts=turn.extra_parts,
            tight=True,
            memory_of=turn.ask.memory_of,
        )
        if turn.asked is not None:
            turn.context[-1] = turn.asked
        turn.rounds -= 1
        return True

    async def finish(self, turn: Turn) -> str:
        """The final reply joins the turn, and the turn is appended to the history once."""
        reply = turn.reply
        if not reply and turn.stopped is not None:
            reply = f"I stopped calling tools without finishing: {turn.stopped}"
        if not reply:
            reply = "(I have no answer to that.)"
        turn.messages.append(Message(role="assistant", content=reply, ts=now_iso()))
        await self._services.memory.persist_turn(turn.session, turn.messages)
        log.info(
            "turn_finished",
            session=turn.session,
            channel=turn.ask.channel,
            rounds=turn.rounds,
            messages=len(turn.messages),
            ms=int((time.monotonic() - turn.started) * 1000),
        )
        return reply

    async def fail(self, turn: Turn, exc: Exception) -> None:
        """The turn broke: its user message is kept in the history, so nothing is lost."""
        await self._services.memory.persist_turn(turn.session, turn.messages[:1])
        log.warning(
            "turn_failed",
            session=turn.session,
            channel=turn.ask.channel,
            rounds=turn.rounds,
            error=type(exc).__name__,
        )

    async def _complete(
        self, turn: Turn, messages: list[Message], definitions: list[ToolDefinition]
    ) -> tuple[str, tuple[ToolCall, ...]]:
        parts: list[str] = []
        calls: tuple[ToolCall, ...] = ()
        turn.request_chars = chars = messages_chars(messages) + self._schemas.chars(definitions)
        on_event = turn.ask.on_event
        async for event in turn.ask.model.chat(messages, definitions):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, ToolCallsReady):
                calls = event.calls
            elif isinstance(event, Usage):
                # The provider's count calibrates the estimate for the next requests.
                self._services.memory.estimator.observe(event.model, chars, event.prompt_tokens)
                await record_usage(
                    self._services.usage, turn.session, turn.purpose, event, turn.ask.person
                )
                continue
            else:  # StreamRestart: what streamed so far is void
                parts.clear()
                calls = ()
            if on_event is not None:
                await on_event(event)
        return "".join(parts), calls
