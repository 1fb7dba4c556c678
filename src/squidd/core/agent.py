"""AgentLoop: one turn of conversation with tools.

`run()` reads the session's history window once, looks there for a reply already given to
the same message, builds the messages from it through the MemoryManager, streams the
model's answer, runs the tool calls it asks for (per-call `extra_tools` first, then the
registry), loops until the model answers without tools or a loop breaker (core/loop_guard.py:
rounds, repeated calls, time) asks it for a final answer without tools, and
appends the whole turn to the session's history once, at the end. A tool that fails or
gets bad arguments becomes an error result the model sees; it never escapes the loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog

from squidd.core.budget import fit_history, shrink_tool_results
from squidd.core.estimator import messages_chars, tools_chars
from squidd.core.loop_guard import LoopGuard
from squidd.core.memory import MemoryManager
from squidd.core.models import (
    Attachment,
    LLMEvent,
    Message,
    SessionId,
    TextDelta,
    ToolCall,
    ToolCallsReady,
    ToolDefinition,
    ToolResult,
    Usage,
    utcnow,
)
from squidd.core.on_demand import LoadTools, on_demand
from squidd.core.ports import (
    AttachmentReader,
    LLMPort,
    PromptSource,
    ResultStore,
    Tool,
    ToolPolicy,
)
from squidd.core.tools import ToolRegistry, definition_of
from squidd.core.usage import UsageSink, record_usage
from squidd.errors import LLMContextOverflowError, ToolError

log = structlog.get_logger()

OnEvent = Callable[[LLMEvent], Awaitable[None]]

DEFAULT_MAX_RESULT_CHARS = 16_000


def _now_iso() -> str:
    return utcnow().isoformat(timespec="seconds")


def _decode_arguments(call: ToolCall) -> dict[str, Any]:
    raw = call.arguments.strip() or "{}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"the arguments for {call.name} are not valid JSON ({exc.msg} at position "
            f"{exc.pos}); send a JSON object matching the tool's parameters"
        ) from None
    if not isinstance(value, dict):
        raise ToolError(f"the arguments for {call.name} must be a JSON object")
    return value


def _purpose(round_number: int) -> str:
    """What a model call of a turn is for, as the usage ledger files it, when the caller
    named no purpose for the turn."""
    return "turn" if round_number == 1 else "tool_step"


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
        clock: Callable[[], float] = time.monotonic,
        on_demand: Sequence[str] = (),
        policy: ToolPolicy | None = None,
        usage: UsageSink | None = None,
        results: ResultStore | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        attachments: AttachmentReader | None = None,
        prompt_parts: Callable[[], Awaitable[Sequence[str]]] | None = None,
    ) -> None:
        # `prompt_parts` gives the system prompt parts of every turn that have their own
        # cap (the skills index); they come before a run's own `extra_parts`.
        self._prompt_parts = prompt_parts
        self._llm = llm
        self._usage = usage
        self._results = results
        self._max_result_chars = max_result_chars
        self._memory = memory
        self._registry = registry
        self._prompt = prompt
        self._max_tool_rounds = max_tool_rounds
        self._max_repeated_tool_calls = max_repeated_tool_calls
        self._max_turn_seconds = max_turn_seconds
        self._clock = clock
        self._on_demand = tuple(on_demand)
        self._policy = policy
        self._attachments = attachments

    def _tools_for(
        self, session: SessionId, channel: str, extra_tools: Sequence[Tool]
    ) -> dict[str, Tool]:
        tools: dict[str, Tool] = {}
        for tool in self._registry.tools():
            tools[tool.name] = tool
        # Per-call tools win over registry tools of the same name (dispatched first).
        for tool in extra_tools:
            tools[tool.name] = tool
        if self._policy is not None:
            tools = {
                name: tool
                for name, tool in tools.items()
                if self._policy.allows(name, channel, session)
            }
        return tools

    def _offer(self, tools: dict[str, Tool]) -> list[ToolDefinition]:
        """The schemas sent: all tools but the on-demand ones, which `load_tools` stands
        in for (and adds to this same list when the model asks); see core/on_demand.py."""
        later = [tool for name, tool in tools.items() if on_demand(name, self._on_demand)]
        definitions = [
            definition_of(tool)
            for name, tool in tools.items()
            if not on_demand(name, self._on_demand)
        ]
        if later:
            loader = LoadTools(later, definitions.append)
            tools[loader.name] = loader
            definitions.append(definition_of(loader))
        return definitions

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
        history already holds a finished turn for it, that reply is returned as it is.
        Raises `LLMError` when the model cannot answer; the user message is still kept in
        the session's history then (as it is when anything else breaks the turn).
        `max_tool_rounds` lowers the round limit for this turn (a sub-agent's step cap).
        """
        started = time.monotonic()
        window = await self._memory.load_window(session)
        if turn_id is not None:
            previous = self._memory.finished_reply(window, turn_id)
            if previous is not None:
                log.info("turn_reused", session=session, channel=channel, turn=turn_id)
                return previous
        model = llm if llm is not None else self._llm
        tools = self._tools_for(session, channel, extra_tools or ())
        definitions = self._offer(tools)

        estimator = self._memory.estimator
        reserved = estimator.tokens(tools_chars(definitions))
        base_prompt = await self._prompt.system_prompt()
        if self._prompt_parts is not None:
            extra_parts = [*await self._prompt_parts(), *extra_parts]
        context = await self._memory.build_messages(
            session,
            base_prompt,
            user_message,
            window=window,
            reserved_tokens=reserved,
            extra_parts=extra_parts,
        )
        kept_text = user_message
        # What the model sees of this turn's message: with attachments, their content too.
        asked: Message | None = None
        if attachments and self._attachments is not None:
            read = await self._attachments.read(attachments)
            kept_text = "\n\n".join(t for t in (user_message, read.kept) if t)
            full_text = "\n\n".join(t for t in (user_message, read.text) if t)
            asked = Message(role="user", content=full_text, images=read.images)
            context[-1] = asked
        turn: list[Message] = [
            Message(
                role="user",
                content=kept_text,
                ts=_now_iso(),
                turn=turn_id,
                attachments=tuple(attachments),
            )
        ]

        guard = LoopGuard(
            # A sub-agent's step cap may lower the limit for its turn, never raise it.
            max_rounds=min(max_tool_rounds or self._max_tool_rounds, self._max_tool_rounds),
            max_repeats=self._max_repeated_tool_calls,
            max_seconds=self._max_turn_seconds,
            clock=self._clock,
        )
        rounds = 0
        reply: str | None = None
        stopped: str | None = None
        retried = False
        try:
            while True:
                rounds += 1
                request = self._fit_request(context, turn[1:], reserved, retried)
                offered = definitions
                if stopped is not None:
                    # Told why, and asked for its answer: no tools are offered any more.
                    request.append(Message(role="user", content=guard.final_prompt(stopped)))
                    offered = []
                try:
                    text, calls = await self._complete(
                        model,
                        request,
                        offered,
                        on_event,
                        session,
                        purpose or _purpose(rounds),
                    )
                except LLMContextOverflowError:
                    budget = self._memory.budget
                    if retried or budget is None:
                        raise
                    # Consolidate or trim, then try once more in the same turn.
                    retried = True
                    chars = messages_chars(request) + tools_chars(offered)
                    estimator.overflowed(chars, budget.context_window)
                    log.warning("context_overflow_retry", session=session, chars=chars)
                    context = await self._memory.build_messages(
                        session,
                        base_prompt,
                        user_message,
                        reserved_tokens=reserved,
                        extra_parts=extra_parts,
                        tight=True,
                    )
                    if asked is not None:
                        context[-1] = asked
                    rounds -= 1
                    continue
                if not calls or stopped is not None:
                    reply = text.strip()
                    break
                turn.append(
                    Message(role="assistant", content=text or None, tool_calls=calls, ts=_now_iso())
                )
                for call in calls:
                    result = await self._dispatch(call, tools)
                    content = await self._cap_result(session, call, result.content)
                    if result.is_error:
                        content = f"Error: {content}"
                    turn.append(
                        Message(
                            role="tool",
                            content=content,
                            tool_call_id=call.id,
                            name=call.name,
                            ts=_now_iso(),
                        )
                    )
                guard.note(calls)
                stopped = guard.reason()
                if stopped is not None:
                    log.warning("tool_calls_stopped", session=session, reason=stopped)
        except Exception as exc:  # kept the user message, then re-raised: nothing is lost
            await self._persist(session, turn[:1])
            log.warning(
                "turn_failed",
                session=session,
                channel=channel,
                rounds=rounds,
                error=type(exc).__name__,
            )
            raise

        if not reply and stopped is not None:
            reply = f"I stopped calling tools without finishing: {stopped}"
        if not reply:
            reply = "(I have no answer to that.)"
        turn.append(Message(role="assistant", content=reply, ts=_now_iso()))
        await self._persist(session, turn)
        log.info(
            "turn_finished",
            session=session,
            channel=channel,
            rounds=rounds,
            messages=len(turn),
            ms=int((time.monotonic() - started) * 1000),
        )
        return reply

    async def _persist(self, session: SessionId, messages: Sequence[Message]) -> None:
        await self._memory.persist_turn(session, messages)

    async def _complete(
        self,
        model: LLMPort,
        messages: list[Message],
        definitions: list[Any],
        on_event: OnEvent | None,
        session: SessionId,
        purpose: str,
    ) -> tuple[str, tuple[ToolCall, ...]]:
        parts: list[str] = []
        calls: tuple[ToolCall, ...] = ()
        chars = messages_chars(messages) + tools_chars(definitions)
        async for event in model.chat(messages, definitions):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, ToolCallsReady):
                calls = event.calls
            elif isinstance(event, Usage):
                # The provider's count calibrates the estimate for the next requests.
                self._memory.estimator.observe(event.model, chars, event.prompt_tokens)
                await record_usage(self._usage, session, purpose, event)
                continue
            else:  # StreamRestart: what streamed so far is void
                parts.clear()
                calls = ()
            if on_event is not None:
                await on_event(event)
        return "".join(parts), calls

    def _fit_request(
        self, context: list[Message], steps: list[Message], reserved: int, tight: bool
    ) -> list[Message]:
        """The request for this round within the budget: first this turn's older tool
        results shrink (the newest round stays whole), then older history makes room."""
        budget = self._memory.budget
        if budget is None or not steps:
            return [*context, *steps]
        limit = budget.fit_tokens(tight=tight)
        estimator = self._memory.estimator
        if estimator.messages([*context, *steps]) + reserved <= limit:
            return [*context, *steps]
        last_round = max(i for i, m in enumerate(steps) if m.role == "assistant")
        steps = shrink_tool_results(steps, last_round)
        if estimator.messages([*context, *steps]) + reserved <= limit:
            return [*context, *steps]
        system, history, user = context[0], context[1:-1], context[-1]
        available = limit - reserved - estimator.messages([system, user, *steps])
        history = fit_history(history, max(0, available), estimator)
        while history and history[0].role != "user":
            history = history[1:]
        return [system, *history, user, *steps]

    async def _cap_result(self, session: SessionId, call: ToolCall, content: str) -> str:
        """`content` as it enters the history: cut to `max_result_chars`, the whole text
        kept in a file that the note names (so the model can read on with read_file)."""
        cap = self._max_result_chars
        if len(content) <= cap:
            return content
        head = content[:cap]
        if self._results is None:
            return f"{head}\n[result cut: {len(content)} characters in all, the first {cap} shown]"
        name = await self._results.save(session, call.id, content)
        log.info("tool_result_saved", tool=call.name, chars=len(content), file=name)
        return (
            f"{head}\n[result cut: {len(content)} characters in all, the first {cap} shown. "
            f"The whole text is in the file {name}; read more with read_file "
            f'(path="{name}", offset={cap}, limit={cap}).]'
        )

    async def _dispatch(self, call: ToolCall, tools: Mapping[str, Tool]) -> ToolResult:
        tool = tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            return ToolResult(f"unknown tool {call.name!r}; available: {known}", is_error=True)
        try:
            arguments = _decode_arguments(call)
            return await tool.execute(arguments)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        except Exception as exc:  # a broken tool must not end the turn
            log.exception("tool_crashed", tool=call.name)
            return ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
