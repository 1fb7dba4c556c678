"""The LLM adapter for any OpenAI-compatible chat endpoint, over `openai.AsyncOpenAI`.

It streams, assembles tool calls from their deltas (the first delta of a call assigns its
`id` and `name`, later ones only append `arguments`; servers that repeat `id`/`name` in
every delta are handled the same way), retries 429/5xx/timeouts/connection errors and
broken streams (an error event after a 200, a garbled event) with capped exponential
backoff and jitter (honouring `Retry-After`), then falls back through an ordered list of
models. It asks for `stream_options.include_usage` and yields the provider's count as a
`Usage` event at the end of the response (providers that send none yield none). When a
failure strikes after text was already streamed, it emits `StreamRestart` before starting
over, so no text reaches the user twice.

The request goes out through the client's own `post` with a body already in the wire format
(`to_openai_message`/`to_openai_tool` build it), not through `chat.completions.create`: that
method walks every message and tool schema through the SDK's typed-parameter transformation
on each call, which cost more CPU than the rest of a turn. `post` keeps what `create` gives:
the client's auth, timeouts, error types and its `AsyncStream` (SSE decoding, error events
inside a 200 raised as `APIError`, the response closed at the end). The stream is
`AsyncStream[object]`, the SDK's own untyped cast: each chunk arrives as the decoded JSON
object and is read here as a plain dict, because building a pydantic `ChatCompletionChunk`
per chunk (`construct_type`) was the largest CPU item left in a turn.

openai's and httpx2's errors become `squidd.errors` types through the adapter's table
(`squidd.llm.errors`); no message carries the API key.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
import httpx2
import structlog
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion

from squidd.config.sections import LLMSettings
from squidd.core.backoff import Backoff
from squidd.core.models import (
    LLMEvent,
    Message,
    StreamRestart,
    TextDelta,
    ToolCall,
    ToolCallsReady,
    ToolDefinition,
    Usage,
)
from squidd.errors import (
    LLMContextOverflowError,
    LLMCredentialsError,
    LLMError,
    LLMRejectedError,
    LLMUnavailableError,
)
from squidd.llm import errors
from squidd.llm.health import ModelHealth
from squidd.text import clean_text

log = structlog.get_logger()


def to_openai_message(message: Message) -> dict[str, Any]:
    # Tool results (a file, a command's output) may carry lone surrogates; the request's
    # JSON encoding would fail on them, so every text goes out as valid Unicode.
    content = None if message.content is None else clean_text(message.content)
    data: dict[str, Any] = {"role": message.role, "content": content}
    if message.role == "assistant" and message.tool_calls:
        data["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": clean_text(call.arguments)},
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        data["tool_call_id"] = message.tool_call_id
        data["content"] = content or ""
    if message.images:  # image content parts: inline data: URLs the model can read
        data["content"] = [
            {"type": "text", "text": content or ""},
            *({"type": "image_url", "image_url": {"url": url}} for url in message.images),
        ]
    return data


def to_openai_tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }


class _CallSlot:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class OpenAILLM:
    """`LLMPort` for OpenAI-compatible endpoints."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        http_client: httpx2.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._settings = settings
        api_key = settings.api_key.get_secret_value() if settings.api_key else "not-needed"
        self._client = AsyncOpenAI(
            api_key=api_key,
            base_url=settings.base_url,
            timeout=httpx2.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
            max_retries=0,  # retries are ours: they must not replay streamed text
            http_client=http_client,
        )
        self._sleep = sleep
        self._backoff = Backoff(settings.retry_base_delay_s, settings.retry_max_delay_s)
        # Shared with the views `preferring` makes: one endpoint, one health.
        self.health = ModelHealth(base_url=settings.base_url, model=settings.model)

    async def aclose(self) -> None:
        await self._client.close()

    @property
    def models(self) -> list[str]:
        return [self._settings.model, *self._settings.fallback_models]

    def preferring(self, model: str) -> OpenAILLM:
        """This client (same connection pool) asking `model` first, then the other configured
        models as fallbacks: a person's `/model` choice for their conversation."""
        view = copy.copy(self)
        rest = [name for name in self.models if name != model]
        view._settings = self._settings.model_copy(update={"model": model, "fallback_models": rest})
        return view

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Wait before retry `attempt` (0-based): the server's Retry-After when it sent one."""
        if retry_after is not None:
            return min(retry_after, self._backoff.maximum_s)
        return self._backoff.delay(attempt + 1)

    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> AsyncIterator[LLMEvent]:
        """The reply's events, from the first model that answers; the outcome is recorded
        in `health` (the last answer, or the last failure and why)."""
        try:
            async for event in self._chat(messages, tools):
                yield event
        except LLMContextOverflowError:
            raise  # the request's size, not the endpoint's health
        except LLMError as exc:
            self.health.failed(str(exc))
            raise

    async def _chat(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> AsyncIterator[LLMEvent]:
        payload = [to_openai_message(m) for m in messages]
        tool_payload = [to_openai_tool(t) for t in tools]
        last_reason = "no model configured"
        for model in self.models:
            for attempt in range(self._settings.max_retries + 1):
                streamed = False
                try:
                    async for event in self._stream_once(model, payload, tool_payload):
                        if isinstance(event, TextDelta):
                            streamed = True
                        yield event
                except LLMUnavailableError as exc:
                    last_reason = str(exc)
                    if streamed:
                        yield StreamRestart(last_reason)
                    if attempt < self._settings.max_retries:
                        delay = self._delay(attempt, exc.retry_after_s)
                        log.warning(
                            "llm_retry",
                            model=model,
                            attempt=attempt + 1,
                            reason=last_reason,
                            retry_in_s=round(delay, 2),
                        )
                        await self._sleep(delay)
                    continue
                except (LLMContextOverflowError, LLMCredentialsError):
                    raise  # the caller must send less, or a human must fix the key
                except LLMRejectedError as exc:
                    last_reason = str(exc)
                    if streamed:
                        yield StreamRestart(last_reason)
                    log.warning("llm_model_failed", model=model, reason=last_reason)
                    break
                else:
                    self.health.succeeded(model)
                    return
            else:
                log.warning("llm_model_exhausted", model=model, reason=last_reason)
            continue
        if last_reason.startswith("rejected"):
            raise LLMRejectedError(f"the model endpoint refused the request: {last_reason}")
        raise LLMUnavailableError(f"the model endpoint did not answer: {last_reason}")

    def _body(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": True,
            # The usage of the call arrives in a last chunk; providers that do not know the
            # option ignore it (the estimate then stands).
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools
        if self._settings.temperature is not None:
            body["temperature"] = self._settings.temperature
        if self._settings.max_tokens is not None:
            body["max_tokens"] = self._settings.max_tokens
        return body

    async def _stream_once(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[LLMEvent]:
        """One request to one model: its text as it streams, then its tool calls and usage.
        A failure leaves as the squidd error the adapter's table names (`squidd.llm.errors`)."""
        slots: dict[int, _CallSlot] = {}
        usage: list[Usage] = []
        try:
            stream = await self._client.post(
                "/chat/completions",
                body=self._body(model, messages, tools),
                cast_to=ChatCompletion,
                options={"security": {"bearer_auth": True}},
                stream=True,
                # `object`: each chunk is the decoded JSON as the server sent it; the SDK
                # skips building a typed model per chunk (see the module docstring).
                stream_cls=AsyncStream[object],
            )
            async with stream:  # the response is closed however the reading ends
                async for chunk in stream:
                    for text in _read_chunk(model, chunk, slots, usage):
                        yield text
        except errors.CAUGHT as exc:
            error = errors.translate(exc, model)
            if error is None:
                raise  # a defect, not the endpoint's doing: no retry can help
            raise error from None
        if slots:
            calls = tuple(
                ToolCall(
                    id=slot.id or f"call_{uuid.uuid4().hex[:12]}",
                    name=slot.name or "",
                    arguments=clean_text("".join(slot.arguments)),
                )
                for _, slot in sorted(slots.items())
            )
            yield ToolCallsReady(calls)
        if usage:
            yield usage[-1]


def _read_chunk(
    model: str, chunk: object, slots: dict[int, _CallSlot], usage: list[Usage]
) -> list[TextDelta]:
    """One decoded chunk: its text to yield; tool-call fragments and usage kept aside."""
    if not isinstance(chunk, dict):
        raise LLMUnavailableError("broken stream (event is not an object)")
    reported = chunk.get("usage")
    if isinstance(reported, dict):
        usage.append(_usage_of(model, reported))
    delta = _first_delta(chunk)
    if delta is None:
        return []
    _add_tool_call_deltas(slots, delta.get("tool_calls"))
    content = delta.get("content")
    if content and isinstance(content, str):
        # A `\\ud800` escape in the stream decodes to a lone surrogate, which no store or
        # channel can encode: the model's text enters squidd clean.
        return [TextDelta(clean_text(content))]
    return []


def _first_delta(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """The first choice's `delta` of a chunk, or None (a usage-only chunk, a bare server)."""
    choices = chunk.get("choices")
    if not choices or not isinstance(choices, list):
        return None
    choice = choices[0]
    delta = choice.get("delta") if isinstance(choice, dict) else None
    return delta if isinstance(delta, dict) else None


def _add_tool_call_deltas(slots: dict[int, _CallSlot], deltas: Any) -> None:
    """Fold one chunk's tool-call fragments into `slots`, keyed by the call's index."""
    if not deltas or not isinstance(deltas, list):
        return
    for position, tc in enumerate(deltas):
        if not isinstance(tc, dict):
            continue
        index = tc.get("index")
        slot = slots.setdefault(index if isinstance(index, int) else position, _CallSlot())
        call_id = tc.get("id")
        if call_id and slot.id is None and isinstance(call_id, str):
            slot.id = call_id
        function = tc.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if name and slot.name is None and isinstance(name, str):
                slot.name = name
            arguments = function.get("arguments")
            if arguments and isinstance(arguments, str):
                slot.arguments.append(arguments)


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _usage_of(model: str, reported: dict[str, Any]) -> Usage:
    """The stream's `usage` object as a `Usage`; missing numbers count as 0."""
    details = reported.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        model=model,
        prompt_tokens=_count(reported.get("prompt_tokens")),
        completion_tokens=_count(reported.get("completion_tokens")),
        cached_tokens=_count(cached),
    )
