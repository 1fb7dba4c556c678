"""A person's own daily caps (`[[people]]` daily_tokens): their turns are refused once their
day's tokens reach the cap, with the fixed reply and no model call; the others are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

REFUSED = "Over today's budget; ask again tomorrow."


async def test_alice_reaches_her_cap_bob_goes_on(tmp_path: Path) -> None:
    with FakeLLM(responder=lambda _: Reply(content="fine", usage=(60, 10, 0))) as llm:
        settings = make_settings(
            tmp_path / "data",
            llm.base_url,
            people=[
                {"name": "alice", "ids": ["@alice:example.org"], "daily_tokens": 100},
                {"name": "bob", "ids": ["@bob:example.org"]},
            ],
            limits={"refusal_text": REFUSED},
        )
        channel = MemoryChannel("memory")
        turns = [("@alice:example.org", "a")] * 3 + [("@bob:example.org", "b")] * 3
        async with running_daemon(settings, [channel]) as daemon:
            for number, (sender, session) in enumerate(turns, 1):
                channel.inject("hi", session=session, sender=sender, source_id=f"m{number}")
                await channel.wait_for(number, what="acked")
            states = {s.scope: s for s in await daemon.caps.states()}
    assert [sent.text for sent in channel.sent] == ["fine", "fine", REFUSED, "fine", "fine", "fine"]
    assert len(llm.chat_requests) == 5  # the refused turn asked no model
    alice = states["daily_tokens of alice"]
    assert (alice.used, alice.cap, alice.reached) == (140, 100, True)
