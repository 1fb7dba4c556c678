"""The LLM faked at the HTTP boundary for unit tests.

`scripted_llm(replies)` returns the real `ProviderChain` adapter whose `AsyncOpenAI` client talks
through an `httpx2.MockTransport`: the real client parses real SSE. Replies are the same
`Reply` objects the scripted server uses (text, tool calls, an HTTP error status, or a
stream that breaks after N characters). Every request body is recorded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2

from squidd.config.sections import LLMSettings
from squidd.core.models import LLMEvent, StreamRestart, TextDelta
from squidd.llm.chain import ProviderChain
from tests.support.fake_llm import Reply, _completion, _Cut, _stream_events, error_body


async def _no_sleep(_: float) -> None:
    return None


@dataclass
class MockLLM:
    script: list[Reply | Callable[[dict[str, Any]], Reply]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    default: Reply | None = None

    def push(self, *replies: Reply | str) -> None:
        for reply in replies:
            self.script.append(Reply(content=reply) if isinstance(reply, str) else reply)

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        self.requests.append(body)
        if self.script:
            item = self.script.pop(0)
            reply = item(body) if callable(item) else item
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError(f"unscripted LLM call: {body.get('messages', [])[-1:]}")
        if reply.status != 200:
            return httpx2.Response(reply.status, json=error_body(reply), headers=reply.headers)
        model = body.get("model", "fake-model")
        if not body.get("stream"):
            return httpx2.Response(200, json=_completion(reply, model))

        async def events() -> AsyncIterator[bytes]:
            try:
                for event in _stream_events(reply, model):
                    yield event
            except _Cut:
                raise httpx2.RemoteProtocolError("peer closed connection mid-stream") from None

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=events())


def scripted_llm(
    *replies: Reply | str, mock: MockLLM | None = None, **settings: Any
) -> tuple[ProviderChain, MockLLM]:
    mock = mock or MockLLM()
    mock.push(*replies)
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(mock.handler))
    options: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1", "model": "main-model"}
    options.update(settings)
    llm = ProviderChain(LLMSettings(**options), http_client=client, sleep=_no_sleep)
    return llm, mock


async def collect(stream: AsyncIterator[LLMEvent]) -> list[LLMEvent]:
    """Every event of one `chat` call."""
    return [event async for event in stream]


def text_of(events: list[LLMEvent]) -> str:
    """What a person ends up with: everything before a `StreamRestart` is withdrawn."""
    out: list[str] = []
    for event in events:
        if isinstance(event, TextDelta):
            out.append(event.text)
        elif isinstance(event, StreamRestart):
            out.clear()
    return "".join(out)
