"""SIGKILL and the API's Idempotency-Key: the stored reply survives the kill, so a retry
after the restart runs no second turn; a request killed mid-turn is answered once by the
retry after the restart, and that answer is the one every later retry gets."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import openai
import pytest

from tests.channels.api.support import ApiDaemon
from tests.channels.api.test_daemon import user_turns
from tests.faults.harness import Counts
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = pytest.mark.anyio


async def ask(api: ApiDaemon, text: str, key: str) -> str:
    async with api.client() as client:
        done = await client.chat.completions.create(
            model="squidd",
            messages=[{"role": "user", "content": text}],
            extra_headers={"Idempotency-Key": key},
        )
    return done.choices[0].message.content or ""


async def test_a_stored_reply_survives_sigkill_and_a_retry_runs_no_second_turn(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    api = ApiDaemon(tmp_path, fake_llm.base_url)
    counts = Counts("api_idempotency_kill")
    try:
        await api.start()
        first = await ask(api, "pay the bill once", "bill-1")
        await api.runs[-1].stop(signal.SIGKILL)
        counts.crashes += 1
        await api.start()
        again = await ask(api, "pay the bill once", "bill-1")
        assert again == first == "echo: pay the bill once"
        assert user_turns(fake_llm, "pay the bill once") == 1

        # Killed while the model is still answering: nothing was stored, the retry after
        # the restart runs the turn (once), and later retries get that same answer.
        fake_llm.push(Reply(content="the slow answer", delay=30))
        async with api.client(timeout=120) as client, anyio.create_task_group() as tg:

            async def killed_request() -> None:
                with pytest.raises(openai.APIConnectionError):
                    await client.chat.completions.create(
                        model="squidd",
                        messages=[{"role": "user", "content": "slow one"}],
                        extra_headers={"Idempotency-Key": "slow-1"},
                    )

            tg.start_soon(killed_request)
            with anyio.fail_after(60):
                while user_turns(fake_llm, "slow one") < 1:  # noqa: ASYNC110 - foreign state
                    await anyio.sleep(0.05)
            await api.runs[-1].stop(signal.SIGKILL)
            counts.crashes += 1
        await api.start()
        retried = await ask(api, "slow one", "slow-1")
        assert retried == "echo: slow one"
        assert await ask(api, "slow one", "slow-1") == retried
        assert user_turns(fake_llm, "slow one") == 2  # the killed call, then the retry's
        counts.sent, counts.answered = 2, 2
    finally:
        api.close()
        counts.report()
