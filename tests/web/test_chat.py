"""The dashboard's chat over HTTP, through the API channel of a running `squidd run`: the
answer streams as it is written (held part way by the scripted model, so the test sees a
draft before the whole), an approval question arrives with its id and is answered in place,
`/new` starts a fresh conversation; the stream needs the CSRF token; without the script the
plain form shows the answer as a page. The streamed turn's timing is recorded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

from squidd.store.timings import TIMING
from tests.channels.api.support import ApiDaemon
from tests.support.dashboard import FORM, log_in, page_text
from tests.support.fake_llm import FakeLLM, Gate, Reply

pytestmark = pytest.mark.anyio


async def events(http: httpx2.AsyncClient, csrf: str, text: str) -> AsyncIterator[dict[str, Any]]:
    async with http.stream(
        "POST", "/chat/stream", data={"csrf": csrf, "text": text}, headers=FORM
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("application/x-ndjson")
        async for line in response.aiter_lines():
            if line.strip():
                yield json.loads(line)


async def test_the_answer_streams_an_approval_is_answered_in_place_and_new_works(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    gate = Gate()
    answer = "Good morning! The kayak is booked for Saturday."
    fake_llm.push(
        Reply(content=answer, gate=gate, gate_after=14),
        Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})]),
        "it ran",
    )
    async with api.http() as http:
        csrf = await log_in(http, api.key)
        refused = await http.post("/chat/stream", data={"text": "hi"}, headers=FORM)
        assert refused.status_code == 403

        seen: list[dict[str, Any]] = []
        with anyio.fail_after(60):
            async for event in events(http, csrf, "good morning"):
                seen.append(event)
                if "draft" in event and gate.reached.is_set() and not gate.release.is_set():
                    # Held part way: the page has a beginning of the answer, not all of it.
                    assert answer.startswith(event["draft"]) and event["draft"] != answer
                    gate.release.set()
        drafts = [e["draft"] for e in seen if "draft" in e]
        assert drafts and gate.release.is_set(), seen
        assert [e for e in seen if "part" in e] == [{"part": answer, "question": ""}]
        assert seen[-1] == {"done": True}
        # The turn's timing is kept for the overview: its duration and first token.
        [timing] = [
            TIMING.loads(line)
            for path in (api.tmp / "data" / "timings").glob("*.jsonl")
            for line in path.read_text().splitlines()
        ]
        assert timing.session == "api:dashboard", timing
        assert timing.first_token_ms is not None and timing.first_token_ms <= timing.duration_ms

        parts: list[dict[str, Any]] = []
        with anyio.fail_after(60):
            async for event in events(http, csrf, "run it"):
                if event.get("question"):
                    said = await http.post(
                        f"/approvals/{event['question']}/yes", data={"csrf": csrf}, headers=FORM
                    )
                    assert said.status_code == 303
                if "part" in event:
                    parts.append(event)
        assert "Run shell: echo ran >> ran.txt?" in parts[0]["part"] and parts[0]["question"]
        assert parts[1] == {"part": "it ran", "question": ""}
        assert (api.tmp / "ws" / "ran.txt").read_text() == "ran\n"

        with anyio.fail_after(60):
            fresh = [e async for e in events(http, csrf, "/new")]
        assert fresh[0]["part"].startswith("Started a new conversation"), fresh

        fake_llm.push("plain answer")
        page = await http.post("/chat", data={"csrf": csrf, "text": "no script here"}, headers=FORM)
        texts = page_text(page.text).texts
        assert "no script here" in texts and "plain answer" in texts, texts
        script = await http.get("/chat.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert "textContent" in script.text and "innerHTML" not in script.text


async def test_stop_cancels_an_answer_being_written_and_model_is_answered(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    gate = Gate()
    fake_llm.push(
        Reply(content="A very long answer that will not be finished.", gate=gate, gate_after=5)
    )
    async with api.http() as http:
        csrf = await log_in(http, api.key)
        first: list[dict[str, Any]] = []

        async def read_first() -> None:
            async for event in events(http, csrf, "tell me everything"):
                first.append(event)

        try:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read_first)
                    # the answer is being written
                    await anyio.to_thread.run_sync(gate.reached.wait, abandon_on_cancel=True)
                    stop = [e async for e in events(http, csrf, "/stop")]
        finally:
            gate.release.set()
        parts = [e["part"] for e in first if "part" in e]
        assert parts == ["Stopped: I cancelled the work on this message, as you asked with /stop."]
        assert [e["part"] for e in stop if "part" in e] == ["Stopped the turn that was running."]
        with anyio.fail_after(60):
            model = [e async for e in events(http, csrf, "/model")]
        assert model[0]["part"].startswith("Model: "), model
