"""AgentLoop: one turn of conversation with tools.

`run()` reads the session's history window once, looks there for a reply already given to
the same message, builds the messages from it through the MemoryManager, streams the
model's answer, runs the tool calls it asks for (per-call `extra_tools` first, then the
registry), loops until the model answers without tools or the round limit is hit, and
appends the whole turn to the session's history once, at the end. A tool that fails or
gets bad arguments becomes an error result the model sees; it never escapes the loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog

from squidd.core.memory import MemoryManager
from squidd.core.models import (
    Attachment,
    LLMEvent,
    Message,
    SessionId,
    TextDelta,
    ToolCall,
    ToolCallsReady,
    ToolResult,
    utcnow,
)
from squidd.core.ports import AttachmentReader, LLMPort, PromptSource, Tool, ToolPolicy
from squidd.core.tools import ToolRegistry, definition_of
from squidd.errors import ToolError

log = structlog.get_logger()

OnEvent = Callable[[LLMEvent], Awaitable[None]]

_MAX_TOOL_RESULT_CHARS = 32_000


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


class AgentLoop:
    def __init__(
        self,
        *,
        llm: LLMPort,
        memory: MemoryManager,
        registry: ToolRegistry,
        prompt: PromptSource,
        max_tool_rounds: int = 20,
        policy: ToolPolicy | None = None,
        attachments: AttachmentReader | None = None,
    ) -> None:
        self._llm = llm
        self._memory = memory
        self._registry = registry
        self._prompt = prompt
        self._max_tool_rounds = max_tool_rounds
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
        attachments: Sequence[Attachment] = (),
    ) -> str:
        """Answer `user_message` in `session`; return the final reply text.

        `attachments` (references into the media store) are read for the model by the
        attachment reader (images, extracted text, transcripts) for this turn; the history
        keeps the references and the short notes, not the files' content.

        `turn_id` names the inbound message answered (stable across redeliveries): when the
        history already holds a finished turn for it, that reply is returned as it is.
        Raises `LLMError` when the model cannot answer; the user message is still kept in
        the session's history then (as it is when anything else breaks the turn).
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
        definitions = [definition_of(tool) for tool in tools.values()]

        base_prompt = await self._prompt.system_prompt()
        context = await self._memory.build_messages(
            session, base_prompt, user_message, window=window
        )
        kept_text = user_message
        if attachments and self._attachments is not None:
            read = await self._attachments.read(attachments)
            kept_text = "\n\n".join(t for t in (user_message, read.kept) if t)
            full_text = "\n\n".join(t for t in (user_message, read.text) if t)
            context[-1] = Message(role="user", content=full_text, images=read.images)
        turn: list[Message] = [
            Message(
                role="user",
                content=kept_text,
                ts=_now_iso(),
                turn=turn_id,
                attachments=tuple(attachments),
            )
        ]

        rounds = 0
        reply: str | None = None
        try:
            while rounds < self._max_tool_rounds:
                rounds += 1
                text, calls = await self._complete(
                    model, [*context, *turn[1:]], definitions, on_event
                )
                if not calls:
                    reply = text.strip()
                    break
                turn.append(
                    Message(role="assistant", content=text or None, tool_calls=calls, ts=_now_iso())
                )
                for call in calls:
                    result = await self._dispatch(call, tools)
                    content = result.content
                    if len(content) > _MAX_TOOL_RESULT_CHARS:
                        content = content[:_MAX_TOOL_RESULT_CHARS] + "\n[truncated]"
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

        if reply is None:
            reply = (
                f"I stopped after {self._max_tool_rounds} rounds of tool calls without "
                "finishing. Tell me how to continue, or narrow the request."
            )
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
    ) -> tuple[str, tuple[ToolCall, ...]]:
        parts: list[str] = []
        calls: tuple[ToolCall, ...] = ()
        async for event in model.chat(messages, definitions):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, ToolCallsReady):
                calls = event.calls
            else:  # StreamRestart: what streamed so far is void
                parts.clear()
                calls = ()
            if on_event is not None:
                await on_event(event)
        return "".join(parts), calls

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
