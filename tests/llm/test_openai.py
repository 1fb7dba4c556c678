"""The OpenAI-compatible adapter over a mocked HTTP transport: real SSE parsing, tool-call
assembly, retries, fallback models, no text twice, errors translated."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest

from squidd.config.sections import LLMSettings
from squidd.core.models import (
    Message,
    StreamRestart,
    TextDelta,
    ToolCallsReady,
    ToolDefinition,
)
from squidd.errors import LLMRejectedError, LLMUnavailableError
from squidd.llm.chain import ProviderChain
from tests.support.fake_llm import Reply
from tests.support.mock_llm import collect, scripted_llm, text_of

pytestmark = pytest.mark.anyio

HELLO = [Message(role="user", content="hello")]


async def test_streams_text_in_pieces() -> None:
    llm, mock = scripted_llm("The quick brown fox jumps.")
    events = await collect(llm.chat(HELLO, []))
    assert len([e for e in events if isinstance(e, TextDelta)]) > 1
    assert text_of(events) == "The quick brown fox jumps."
    assert mock.requests[0]["stream"] is True
    assert mock.requests[0]["model"] == "main-model"


async def test_tool_calls_assembled_from_fragments() -> None:
    llm, mock = scripted_llm(
        Reply(tool_calls=[("get_weather", {"city": "Paris"}), ("echo", {"text": "x" * 40})])
    )
    tools = [ToolDefinition("get_weather", "weather", {"type": "object", "properties": {}})]
    events = await collect(llm.chat(HELLO, tools))
    ready = [e for e in events if isinstance(e, ToolCallsReady)]
    assert len(ready) == 1
    calls = ready[0].calls
    assert [c.name for c in calls] == ["get_weather", "echo"]
    assert json.loads(calls[0].arguments) == {"city": "Paris"}
    assert json.loads(calls[1].arguments) == {"text": "x" * 40}
    assert all(c.id.startswith("call_") for c in calls)
    assert mock.requests[0]["tools"][0]["function"]["name"] == "get_weather"


async def _no_sleep(_: float) -> None:
    return None


def llm_over(
    handler: Callable[[httpx2.Request], httpx2.Response],
    *,
    sleep: Callable[[float], Awaitable[None]] = _no_sleep,
    **settings: Any,
) -> ProviderChain:
    """The real adapter over a hand-written HTTP handler (for raw-stream cases)."""
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    options: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1", **settings}
    return ProviderChain(LLMSettings(**options), http_client=client, sleep=sleep)


def _sse(*deltas: dict[str, Any], finish: str = "tool_calls") -> bytes:
    body = b""
    for delta in [*deltas, {}]:
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None if delta else finish}],
        }
        body += b"data: " + json.dumps(chunk).encode() + b"\n\n"
    return body + b"data: [DONE]\n\n"


async def test_servers_repeating_id_and_name_in_every_delta() -> None:
    """Some servers resend id and name with each fragment: assign them, append arguments only."""
    frag = {"id": "call_1", "type": "function"}
    body = _sse(
        {"tool_calls": [{"index": 0, **frag, "function": {"name": "echo", "arguments": '{"te'}}]},
        {"tool_calls": [{"index": 0, **frag, "function": {"name": "echo", "arguments": 'xt":'}}]},
        {"tool_calls": [{"index": 0, **frag, "function": {"name": "echo", "arguments": '"hi"}'}}]},
    )

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    llm = llm_over(handler)
    events = await collect(llm.chat(HELLO, []))
    (ready,) = [e for e in events if isinstance(e, ToolCallsReady)]
    assert ready.calls[0].id == "call_1"
    assert ready.calls[0].name == "echo"
    assert json.loads(ready.calls[0].arguments) == {"text": "hi"}


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retries_transient_statuses(status: int) -> None:
    llm, mock = scripted_llm(Reply(status=status), Reply(status=status), "finally", max_retries=2)
    events = await collect(llm.chat(HELLO, []))
    assert text_of(events) == "finally"
    assert len(mock.requests) == 3


async def test_gives_up_after_retries_with_clear_error() -> None:
    llm, mock = scripted_llm(*[Reply(status=503)] * 3, max_retries=2)
    with pytest.raises(LLMUnavailableError, match="HTTP 503"):
        await collect(llm.chat(HELLO, []))
    assert len(mock.requests) == 3


async def test_falls_over_to_the_next_model_at_once_then_tries_the_chain_again() -> None:
    llm, mock = scripted_llm(Reply(status=503), "from fallback", fallback_models=["backup-model"])
    assert text_of(await collect(llm.chat(HELLO, []))) == "from fallback"
    assert [r["model"] for r in mock.requests] == ["main-model", "backup-model"]

    llm, mock = scripted_llm(
        Reply(status=503), Reply(status=503), "second round", fallback_models=["backup-model"]
    )
    assert text_of(await collect(llm.chat(HELLO, []))) == "second round"
    assert [r["model"] for r in mock.requests] == ["main-model", "backup-model", "main-model"]


async def test_unknown_model_goes_to_fallback_at_once() -> None:
    llm, mock = scripted_llm(Reply(status=404), "ok", max_retries=3, fallback_models=["b"])
    assert text_of(await collect(llm.chat(HELLO, []))) == "ok"
    assert [r["model"] for r in mock.requests] == ["main-model", "b"]


async def test_partial_output_then_failure_restarts_without_duplicate_text() -> None:
    llm, _ = scripted_llm(
        Reply(content="This answer breaks off in the middle", cut_after=14),
        "Complete answer.",
        max_retries=0,
        fallback_models=["backup-model"],
    )
    events = await collect(llm.chat(HELLO, []))
    restarts = [e for e in events if isinstance(e, StreamRestart)]
    assert len(restarts) == 1
    assert text_of(events) == "Complete answer."


async def test_bad_key_is_rejected_without_retry_and_without_the_key() -> None:
    llm, mock = scripted_llm(
        Reply(status=401),
        api_key="sk-supersecretvalue123",
        max_retries=3,
        fallback_models=["b"],
    )
    with pytest.raises(LLMRejectedError) as info:
        await collect(llm.chat(HELLO, []))
    assert len(mock.requests) == 1
    assert "sk-supersecret" not in str(info.value)


async def test_timeout_is_retried() -> None:
    attempts = 0

    def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise httpx2.ReadTimeout("slow", request=request)
        return httpx2.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=_sse({"content": "late but here"}, finish="stop"),
        )

    llm = llm_over(handler, max_retries=1)
    assert text_of(await collect(llm.chat(HELLO, []))) == "late but here"
    assert attempts == 2


async def test_unreachable_endpoint_is_unavailable() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    llm = llm_over(handler, max_retries=1)
    with pytest.raises(LLMUnavailableError, match="connection failed"):
        await collect(llm.chat(HELLO, []))


async def test_retry_after_header_is_honoured() -> None:
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    def handler(request: httpx2.Request) -> httpx2.Response:
        if not delays:
            return httpx2.Response(429, headers={"retry-after": "7"}, json={"error": {}})
        return httpx2.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=_sse({"content": "ok"}, finish="stop"),
        )

    llm = llm_over(handler, sleep=record, max_retries=2)
    assert text_of(await collect(llm.chat(HELLO, []))) == "ok"
    assert delays == [7.0]


@pytest.mark.parametrize(
    "broken",
    [
        b'data: {"error": {"message": "upstream overloaded", "code": 502}}\n\n',
        b"data: {not json\n\n",
        b'data: ["not", "a", "chunk"]\n\n',
    ],
)
async def test_error_inside_the_stream_is_retried_then_unavailable(broken: bytes) -> None:
    """Some OpenAI-compatible servers (proxies, routers) report a failure as an SSE event
    after a 200, or send a garbled event: that is a retry, then a clear LLMError, never a
    stray exception (which would skip the fallback and lose the user's message)."""
    attempts = 0
    partial = _sse({"content": "Half an ans"}, finish="stop").split(b"data: [DONE]")[0]

    def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=partial + broken
            )
        if attempts == 2:
            return httpx2.Response(
                200,
                headers={"content-type": "text/event-stream"},
                content=_sse({"content": "A whole answer."}, finish="stop"),
            )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=broken)

    llm = llm_over(handler, max_retries=1)
    events = await collect(llm.chat(HELLO, []))
    assert text_of(events) == "A whole answer."
    assert any(isinstance(e, StreamRestart) for e in events)
    with pytest.raises(LLMUnavailableError, match="broken stream"):
        await collect(llm.chat(HELLO, []))
    assert attempts == 4
