"""A script's API request whose tool needs an approval, given from the dashboard."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from tests.channels.api.support import ApiDaemon
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.scenario import FORM, common_sections, log_in, ran

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COMMAND = "echo ran >> ran.txt"


async def test_an_api_request_waits_for_the_dashboard_approval_and_runs_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Bob's nightly script asks the bot, through the OpenAI-compatible API, to tidy up; the
    model wants to run a shell command, which asks first. Bob opens the dashboard, logs in
    with the script's API key, finds the question naming the exact command among the pending
    approvals and presses Approve. The script's request, which waited all along, gets the
    question and the answer; the command ran once, the question is gone from the page, the
    audit page says the dashboard approved it. The script retries the same request (same
    Idempotency-Key): the same answer, nothing run again, no model call."""
    fake_llm.push(Reply(tool_calls=[("shell", {"command": COMMAND})]), "Tidied up.")
    sections = common_sections(tmp_path, [])
    daemon = ApiDaemon(tmp_path, fake_llm.base_url, sections=sections)
    answers: list[str] = []
    request = {
        "model": "squidd",
        "messages": [{"role": "user", "content": "tidy up please"}],
        "user": "nightly",
        "extra_headers": {"Idempotency-Key": "nightly-1"},
    }
    try:
        await daemon.start()
        async with daemon.client(timeout=120) as client, daemon.http() as dashboard:

            async def script() -> None:
                done = await client.chat.completions.create(**request)  # type: ignore[call-overload]
                answers.append(done.choices[0].message.content or "")

            async with anyio.create_task_group() as tg:
                tg.start_soon(script)
                csrf = await log_in(dashboard, daemon.key)
                page = ""
                with anyio.fail_after(60):
                    while "Run shell: echo ran &gt;&gt; ran.txt?" not in page:
                        await anyio.sleep(0.05)
                        page = (await dashboard.get("/")).text
                found = re.search(r'action="(/approvals/[0-9a-f]+/yes)"', page)
                assert found is not None, page
                assert ran(tmp_path) == 0
                approved = await dashboard.post(found.group(1), data={"csrf": csrf}, headers=FORM)
                assert approved.status_code == 303
            [answer] = answers
            question = r"Approval needed \([0-9a-f]{8}\): Run shell: echo ran >> ran\.txt\?"
            assert re.fullmatch(question + r".*\n\nTidied up\.", answer, re.S), answer
            assert "Run shell" not in (await dashboard.get("/")).text
            audit = (await dashboard.get("/audit")).text
            assert "<td>shell</td><td>approved</td><td>dashboard</td>" in audit, audit

            again = await client.chat.completions.create(**request)  # type: ignore[call-overload]
            assert again.choices[0].message.content == answer
        assert ran(tmp_path) == 1
        assert len(fake_llm.chat_requests) == 2
    finally:
        daemon.close()
