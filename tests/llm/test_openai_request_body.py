"""The chat request goes out as the body squidd built, the same JSON the SDK's typed
`chat.completions.create` would send, with the key as a Bearer header, over httpx2
without the SDK (its per-call parameter transformation and per-chunk typed models were the
largest CPU costs of a turn; docs/performance.md)."""

from __future__ import annotations

import json

import httpx2
import pytest
from openai._utils._transform import async_maybe_transform
from openai.types.chat import completion_create_params

from squidd.config.sections import LLMSettings
from squidd.core.models import Message, TextDelta, ToolCall, ToolCallsReady, ToolDefinition, Usage
from squidd.llm.chain import ProviderChain
from squidd.llm.openai import to_openai_message, to_openai_tool
from tests.support.daemon import run_python
from tests.support.fake_llm import FakeLLM, Reply
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


# A model call in a fresh interpreter (this one has imported the SDK for the test above).
CALL_PROBE = """
import json, sys
import anyio
from squidd.config.sections import LLMSettings
from squidd.core.models import Message, TextDelta
from squidd.llm.chain import ProviderChain

async def main() -> str:
    llm = ProviderChain(LLMSettings(base_url=sys.argv[1], model="m", api_key="sk-probe"))
    try:
        events = [e async for e in llm.chat([Message(role="user", content="hi")], [])]
    finally:
        await llm.aclose()
    return "".join(e.text for e in events if isinstance(e, TextDelta))

print(json.dumps([anyio.run(main), "openai" in sys.modules]))
"""


def test_a_model_call_does_not_load_the_sdk() -> None:
    """The request and its stream go over httpx2 directly: the SDK's type tree (0.4 s and
    22 MiB to import, and more CPU per call than the rest of the HTTP path) stays out."""
    with FakeLLM() as llm:
        llm.push("Hello there.")
        probe = run_python("-c", CALL_PROBE, llm.base_url)
        keys = list(llm.keys)
    assert probe.returncode == 0, probe.stderr
    text, sdk_loaded = json.loads(probe.stdout.strip().splitlines()[-1])
    assert text == "Hello there."
    assert sdk_loaded is False
    assert keys == ["sk-probe"]


async def test_stream_chunks_arrive_whole() -> None:
    """Text, tool calls and usage read from the chunks as plain JSON arrive whole."""
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
