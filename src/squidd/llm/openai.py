"""One request to any OpenAI-compatible chat endpoint, over `openai.AsyncOpenAI`
(`EndpointClient`: one base URL, one key); the chain of providers (llm/chain.py) decides
what to try next when it fails.

It streams and assembles tool calls from their deltas (the first delta of a call assigns
its `id` and `name`, later ones only append `arguments`; servers that repeat `id`/`name` in
every delta are handled the same way). It asks for `stream_options.include_usage` and yields
the provider's count as a `Usage` event at the end of the response (providers that send none
yield none). A broken stream (an error event after a 200, a garbled event) leaves as an
error like any other failure.

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

The SDK is imported, and its client built, at an endpoint's first request: `import openai`
loads its whole type tree and aiohttp, about 0.4 s and 22 MiB, which a daemon that has not
answered yet does not need (docs/performance.md).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2

from squidd.core.models import (
    LLMEvent,
    Message,
    TextDelta,
    ToolCall,
    ToolCallsReady,
    ToolDefinition,
    Usage,
)
from squidd.errors import LLMUnavailableError
from squidd.text import clean_text

if TYPE_CHECKING:
    from openai import AsyncOpenAI


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


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """What every request of a chain carries beside the model and the messages."""

    temperature: float | None = None
    max_tokens: int | None = None


class EndpointClient:
    """One OpenAI-compatible endpoint with one key: one request at a time, no retry (the
    chain, llm/chain.py, decides what happens after a failure)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url
        self._api_key = api_key
        self._timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
        self._http_client = http_client
        self._built: AsyncOpenAI | None = None

    def _client(self) -> AsyncOpenAI:
        """The SDK's client, built at the first request (the module says why)."""
        if self._built is None:
            from openai import AsyncOpenAI

            self._built = AsyncOpenAI(
                api_key=self._api_key or "not-needed",
                base_url=self.base_url,
                timeout=self._timeout,
                max_retries=0,  # retries are the chain's: they must not replay streamed text
                http_client=self._http_client,
            )
        return self._built

    async def aclose(self) -> None:
        if self._built is not None:
            await self._built.close()
        elif self._http_client is not None:
            await self._http_client.aclose()  # what the SDK's close would have done

    async def stream(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        options: RequestOptions,
    ) -> AsyncIterator[LLMEvent]:
        """One request to one model: its text as it streams, then its tool calls and usage.
        A failure leaves as the squidd error the adapter's table names (`squidd.llm.errors`)."""
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion

        from squidd.llm import errors  # its table names the SDK's classes

        slots: dict[int, _CallSlot] = {}
        usage: list[Usage] = []
        client = self._client()
        try:
            stream = await client.post(
                "/chat/completions",
                body=_body(model, messages, tools, options),
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


def _body(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    options: RequestOptions,
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
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    return body


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
