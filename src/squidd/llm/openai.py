"""One request to any OpenAI-compatible chat endpoint (`EndpointClient`: one base URL, one
key), sent over httpx2 as the endpoint's documented HTTP API (`POST {base_url}/chat/completions`
with `"stream": true`); the chain of providers (llm/chain.py) decides what to try next when
it fails.

It streams and assembles tool calls from their deltas (the first delta of a call assigns
its `id` and `name`, later ones only append `arguments`; servers that repeat `id`/`name` in
every delta are handled the same way). It asks for `stream_options.include_usage` and yields
the provider's count as a `Usage` event at the end of the response (providers that send none
yield none). A broken stream (an error event after a 200, a garbled event) leaves as an
error like any other failure.

Why not the `openai` SDK: it cost more CPU per call than the rest of a turn's HTTP path (its
request options, auth and retry layers, its SSE decoder, a drain per response), and its
import cost the first call 0.6-0.9 s and 35 MiB of resident memory (docs/performance.md,
"The model call's HTTP path"). The request here is the body squidd built
(`to_openai_message`/`to_openai_tool`), serialised once; the answer is read as plain JSON,
one event at a time (`_events`), and each chunk as a plain dict. What the SDK gave is kept:
the Bearer key, the timeouts on every request, no retry of its own, the response closed
however the reading ends (the rest of a finished body read first, briefly, so the connection
goes back to the pool), and its errors' meaning: an error answer is worded by llm/status.py;
a network failure or timeout, before the answer or during it, through the adapter's table
(llm/errors.py) by llm/causes.py, as the SDK's connection and timeout errors were; an error
event or a garbled one as a broken stream. No message carries the API key.

Each endpoint keeps its own connection pool (one `httpx2.AsyncClient`, built at its first
request, with the process's one TLS context: llm/http.py), as large as the SDK's was: a
shared default pool of 20 connections cost fifty turns at once +17% CPU.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
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
from squidd.llm import errors, status
from squidd.llm.http import async_client
from squidd.text import clean_text


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


_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
"""The SDK's own pool size: fifty turns at once keep their connections alive."""

_DRAIN_S = 0.1
"""How long the rest of a body after `[DONE]` is read before the connection is dropped."""


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
        self._url = httpx2.URL(base_url.rstrip("/") + "/chat/completions")
        self._own_headers = {
            "Authorization": f"Bearer {api_key or 'not-needed'}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }
        self._headers: httpx2.Headers | None = None
        self._timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
        self._extensions = {"timeout": self._timeout.as_dict()}
        self._http_client = http_client

    def _request(self, body: bytes) -> tuple[httpx2.AsyncClient, httpx2.Request]:
        """The endpoint's client (with its pool, built at the first request: the module
        says why) and the request. The request is built here, not by `build_request`, which
        parses the URL and merges headers, cookies and timeouts anew each time; the
        client's own default headers were merged once."""
        client = self._http_client
        if client is None:
            client = self._http_client = async_client(
                timeout=self._timeout, limits=_LIMITS, follow_redirects=True
            )
        if self._headers is None:
            self._headers = httpx2.Headers({**client.headers, **self._own_headers})
        request = httpx2.Request(
            "POST", self._url, headers=self._headers, content=body, extensions=self._extensions
        )
        return client, request

    async def aclose(self) -> None:
        if self._http_client is not None:
            await self._http_client.aclose()

    async def stream(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        options: RequestOptions,
    ) -> AsyncIterator[LLMEvent]:
        """One request to one model: its text as it streams, then its tool calls and usage.
        A failure leaves as the squidd error that says what to do (the module says which)."""
        slots: dict[int, _CallSlot] = {}
        usage: list[Usage] = []
        client, request = self._request(_encode(_body(model, messages, tools, options)))
        try:
            response = await client.send(request, stream=True)
            try:
                if response.status_code >= 400:
                    await response.aread()
                    answer = status.ErrorAnswer.parse(
                        response.status_code, response.headers, response.text.strip()
                    )
                    raise status.error_of(answer, model)
                async for data in _events(response):
                    for text in _read_chunk(model, data, slots, usage):
                        yield text
            finally:
                await response.aclose()
        except errors.CAUGHT as exc:
            error = errors.translate(exc)
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


def _encode(body: dict[str, Any]) -> bytes:
    """The request's one serialisation (ASCII: a lone surrogate cannot break it)."""
    return json.dumps(body).encode()


async def _events(response: httpx2.Response) -> AsyncIterator[object]:
    """The decoded `data` of each server-sent event until `[DONE]` or the body's end.

    Lines end in LF, CRLF or CR (a CR at a chunk's end waits for the next chunk: it may be
    half of a CRLF); a blank line ends an event; `event:`, `id:` and `retry:` fields and
    comments are ignored (a chat stream's events are told apart by their data), and so is
    an event without data (a keep-alive). An event whose data is not JSON is a broken
    stream; so is a JSON object with an `error` (proxies report overload so after a 200)."""
    pending = b""
    data: list[bytes] = []
    # The raw bytes when they are not compressed: no decoder between the socket and here
    # (a response whose body is already read, as a test's, serves it through aiter_bytes).
    plain = (
        response.headers.get("content-encoding", "identity") == "identity"
        and not response.is_stream_consumed
    )
    async for chunk in response.aiter_raw() if plain else response.aiter_bytes():
        lines = (pending + chunk).splitlines(keepends=True)
        pending = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
        for raw in _complete(lines, data):
            if raw.startswith(b"[DONE]"):
                await _drain(response)
                return
            yield _decoded(raw)
    for raw in _complete([pending] if pending.endswith(b"\r") else [], data):
        if not raw.startswith(b"[DONE]"):
            yield _decoded(raw)


def _complete(lines: list[bytes], data: list[bytes]) -> list[bytes]:
    """The data of each event these whole lines end; `data` keeps an unfinished one's."""
    ended: list[bytes] = []
    for line in lines:
        line = line.rstrip(b"\r\n")
        if line:
            field, _, value = line.partition(b":")
            if field == b"data":
                data.append(value[1:] if value.startswith(b" ") else value)
        elif data:
            ended.append(b"\n".join(data))
            data.clear()
    return ended


def _decoded(raw: bytes) -> object:
    try:
        decoded = json.loads(raw)
    except ValueError:  # not JSON, or not UTF-8
        raise LLMUnavailableError("broken stream (unreadable event)") from None
    if isinstance(decoded, dict) and decoded.get("error"):
        raise LLMUnavailableError("broken stream (error event)")
    return decoded


async def _drain(response: httpx2.Response) -> None:
    """Read what follows `[DONE]` (usually nothing), so an HTTP/1.1 connection can be kept;
    a server that holds the body open loses the connection after `_DRAIN_S`."""
    stream = response.stream
    if response.http_version != "HTTP/1.1" or not isinstance(stream, httpx2.AsyncByteStream):
        return
    try:
        with anyio.move_on_after(_DRAIN_S):
            async for _ in stream:
                await anyio.lowlevel.checkpoint()
    except errors.CAUGHT:
        pass  # the answer is whole: what the server does after it is no failure


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
