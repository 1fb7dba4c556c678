"""The API channel end to end: the official `openai` client against `squidd run` with the
scripted model, streamed and not; Idempotency-Key retries; a client gone mid-stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.api.support import ApiDaemon
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = pytest.mark.anyio


@pytest.fixture
async def api(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[ApiDaemon]:
    daemon = ApiDaemon(tmp_path, fake_llm.base_url)
    try:
        await daemon.start()
        yield daemon
    finally:
        daemon.close()


def user_turns(fake_llm: FakeLLM, text: str) -> int:
    """How many model calls had `text` as their last user message (turns run for it)."""
    return sum(
        1
        for r in fake_llm.chat_requests
        if r["messages"][-1].get("role") == "user" and r["messages"][-1].get("content") == text
    )


async def test_the_openai_client_gets_answers_streamed_and_not(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    async with api.client() as client:
        models = await client.models.list()
        assert [m.id for m in models.data] == ["squidd"]
        done = await client.chat.completions.create(
            model="squidd", messages=[{"role": "user", "content": "hello api"}]
        )
        assert done.choices[0].message.content == "echo: hello api"
        assert done.choices[0].finish_reason == "stop"
        stream = await client.chat.completions.create(
            model="squidd",
            messages=[
                {"role": "system", "content": "ignored: squidd keeps its own prompt"},
                {"role": "user", "content": "an old message the client replays"},
                {"role": "assistant", "content": "whatever"},
                {"role": "user", "content": "stream me"},
            ],
            stream=True,
        )
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        assert "".join(parts) == "echo: stream me"
        # Only the last user message is input: the replayed one never reached the model.
        assert user_turns(fake_llm, "an old message the client replays") == 0
        assert not any(
            "ignored: squidd keeps" in str(m.get("content"))
            for r in fake_llm.chat_requests
            for m in r["messages"]
        )


async def test_one_conversation_per_name_and_its_history_is_squidds(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    async with api.client() as client:
        await client.chat.completions.create(
            model="squidd", messages=[{"role": "user", "content": "remember 42"}], user="work"
        )
        await client.chat.completions.create(
            model="squidd",
            messages=[{"role": "user", "content": "what was it?"}],
            extra_headers={"X-Squidd-Conversation": "work"},
        )
        last = fake_llm.chat_requests[-1]["messages"]
        assert any(m.get("content") == "remember 42" for m in last), last  # from squidd's memory
        await client.chat.completions.create(
            model="squidd", messages=[{"role": "user", "content": "fresh"}], user="other"
        )
        assert not any(
            m.get("content") == "remember 42" for m in fake_llm.chat_requests[-1]["messages"]
        )


async def test_a_retry_with_the_same_idempotency_key_runs_no_second_turn(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    async with api.client() as client:
        headers = {"Idempotency-Key": "retry-me-1"}
        messages = [{"role": "user", "content": "charge me once"}]
        first = await client.chat.completions.create(
            model="squidd", messages=messages, extra_headers=headers
        )
        again = await client.chat.completions.create(
            model="squidd", messages=messages, extra_headers=headers
        )
        assert again.choices[0].message.content == first.choices[0].message.content
        assert again.id == first.id
        assert user_turns(fake_llm, "charge me once") == 1
        # A stream of the same request gets the stored reply too.
        stream = await client.chat.completions.create(
            model="squidd", messages=messages, extra_headers=headers, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == "echo: charge me once"
        assert user_turns(fake_llm, "charge me once") == 1


async def test_a_client_gone_mid_stream_leaves_the_finished_turn_for_its_retry(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    fake_llm.push(Reply(content="slow but sure", delay=1.5))
    body = {"model": "squidd", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    headers = api.auth(**{"Idempotency-Key": "gone-1"})
    stream = ("POST", "/v1/chat/completions")
    async with api.http() as http, http.stream(*stream, json=body, headers=headers) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                break  # the first chunk: the turn runs; the client hangs up
    # The handler notices the hang-up when the reply is there to write: the turn finished.
    await api.runs[-1].wait_event("api_client_gone")
    async with api.http() as http:
        retry = await http.post(
            "/v1/chat/completions", json={**body, "stream": False}, headers=headers
        )
    assert retry.status_code == 200, retry.text
    assert retry.json()["choices"][0]["message"]["content"] == "slow but sure"
    assert user_turns(fake_llm, "go") == 1
