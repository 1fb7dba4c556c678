"""The chat request goes out as the body squidd built, the same JSON the SDK's typed
`chat.completions.create` would send, without running the SDK's per-call parameter
transformation (the largest CPU cost of a turn before), and with the client's auth."""

from __future__ import annotations

from typing import Any

import httpx2
import openai._base_client as sdk_base_client
import openai.resources.chat.completions.completions as sdk_completions
import pytest
from openai._utils._transform import async_maybe_transform
from openai.types.chat import completion_create_params

from squidd.config.sections import LLMSettings
from squidd.core.models import Message, TextDelta, ToolCall, ToolCallsReady, ToolDefinition, Usage
from squidd.llm.chain import ProviderChain
from squidd.llm.openai import to_openai_message, to_openai_tool
from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM, scripted_llm

pytestmark = pytest.mark.anyio

CONVERSATION = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="weather in Paris? \ud800"),
    Message(
        role="assistant",
        content=None,
        tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),),
    ),
    Message(role="tool", content="sunny", tool_call_id="call_1"),
    Message(role="assistant", content="Sunny."),
    Message(role="user", content="and tomorrow?"),
]
TOOLS = [
    ToolDefinition(
        "get_weather",
        "The weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
]


async def test_body_is_what_the_typed_create_would_send() -> None:
    llm, mock = scripted_llm("ok", temperature=0.2, max_tokens=300)
    events = [e async for e in llm.chat(CONVERSATION, TOOLS)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]
    expected = await async_maybe_transform(
        {
            "model": "main-model",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [to_openai_message(m) for m in CONVERSATION],
            "tools": [to_openai_tool(t) for t in TOOLS],
            "temperature": 0.2,
            "max_tokens": 300,
        },
        completion_create_params.CompletionCreateParamsStreaming,
    )
    assert mock.requests == [expected]


async def test_the_sdk_parameter_transformation_is_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the request was run through the typed-parameter transformation")

    monkeypatch.setattr(sdk_completions, "async_maybe_transform", refuse)
    llm, mock = scripted_llm("ok")
    events = [e async for e in llm.chat(CONVERSATION, TOOLS)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]
    assert len(mock.requests) == 1


async def test_stream_chunks_are_read_without_building_typed_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each stream chunk is read as the decoded JSON object: the SDK's per-chunk typed model
    (`construct_type`) cost more CPU than the rest of a turn. Text, tool calls and usage
    still arrive whole."""

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a stream chunk was built as a typed SDK model")

    monkeypatch.setattr(sdk_base_client, "construct_type", refuse)
    call = Reply(content="Checking.", tool_calls=[("get_weather", {"city": "Paris"})])
    call.usage = (120, 8, 100)
    llm, _ = scripted_llm(call)
    events = [e async for e in llm.chat(CONVERSATION, TOOLS)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Checking."
    ready = [e for e in events if isinstance(e, ToolCallsReady)]
    assert [(c.name, c.arguments) for c in ready[0].calls] == [("get_weather", '{"city": "Paris"}')]
    assert events[-1] == Usage(
        model="main-model",
        prompt_tokens=120,
        completion_tokens=8,
        cached_tokens=100,
        provider="default",
    )


async def test_the_request_carries_the_api_key_as_bearer() -> None:
    mock = MockLLM()
    mock.push("ok")
    seen: list[httpx2.Request] = []

    def recording(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return mock.handler(request)

    settings = LLMSettings(
        base_url="http://127.0.0.1:9/v1", model="main-model", api_key="sk-test-body-0000"
    )
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(recording))
    llm = ProviderChain(settings, http_client=client)
    [e async for e in llm.chat(CONVERSATION[:2], [])]
    assert seen[0].headers["authorization"] == "Bearer sk-test-body-0000"
    assert seen[0].url.path == "/v1/chat/completions"
