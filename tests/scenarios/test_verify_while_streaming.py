"""SAS verification of the bot from Element while an answer streams into the same chat."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import SynapseServer, User
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Gate, Reply
from tests.support.matrix import start_squidd
from tests.support.scenario import matrix_config, squidd

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

ANSWER = "\n\n".join(f"Step {i} of the recipe: stir, taste and wait a little." for i in range(10))


def shows(messages: list[dict[str, Any]], text: str) -> bool:
    """Whether one of the bot's messages (or the last edit of one) shows `text` whole."""
    return any(m.get("body") in (text, f"* {text}") for m in messages)


async def seen(
    person: ElementClient, room: str, sender: str, check: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """`sender`'s messages in `room` as the person's client has them, once `check` holds
    (the client's record is foreign state: polled, with a bound)."""
    with anyio.fail_after(60):
        while True:
            messages = await person.messages(room, sender)
            if check(messages):
                return messages
            await anyio.sleep(0.1)


async def test_verifying_the_bot_while_an_answer_streams_then_a_message_is_answered(
    synapse: SynapseServer,
    bot: User,
    make_element: Callable[..., Any],
    tmp_path: Path,
    fake_llm: FakeLLM,
    squidds: list[DaemonProcess],
) -> None:
    """Alice, on Element, asks her bot for a recipe in their encrypted direct chat. While
    the answer is still being written into the chat, she presses "Verify" on the bot in that
    same chat; the bot's owner compares the emoji with `squidd matrix verify` and confirms
    with `--yes`, and so does she. The verification completes on both sides, the answer
    finishes where it was streaming, and the next thing she writes is answered."""
    gate = Gate()
    fake_llm.push(Reply(content=ANSWER, piece_chars=30, gate=gate, gate_after=300), "Enjoy!")
    alice: ElementClient = await make_element("alice")
    config = matrix_config(tmp_path, fake_llm.base_url, synapse, bot, [alice.user_id])
    daemon = await start_squidd(squidds, config, tmp_path / "squidd.log")
    room = await alice.create_dm(bot.user_id)
    await alice.wait_joined(room, bot.user_id)
    [device] = await alice.wait_devices(bot.user_id)

    asked = await alice.send_text(room, "how do I make risotto?")
    assert await anyio.to_thread.run_sync(gate.reached.wait, 60)
    [partial] = await alice.wait_messages(bot.user_id, room_id=room, timeout=60)
    assert partial["in_reply_to"] == asked and partial["body"] != ANSWER

    flow = await alice.request_verification(bot.user_id, room_id=room)
    await alice.wait_verification(flow_id=flow["flow_id"], phase="Ready")
    await alice.start_sas(flow["flow_id"])
    shown = await alice.wait_verification(flow_id=flow["flow_id"], sas=True)
    listed = await anyio.to_thread.run_sync(lambda: squidd(config, "matrix", "verify"))
    assert "  ".join(f"{symbol} {name}" for symbol, name in shown["emoji"]) in listed
    await anyio.to_thread.run_sync(lambda: squidd(config, "matrix", "verify", "--yes"))
    await alice.confirm_sas(flow["flow_id"])
    done = await alice.wait_verification(flow_id=flow["flow_id"], phase="Done")
    assert done["cancel_code"] is None, done
    assert (await alice.wait_user_verified(bot.user_id))["verified"]
    trust = await alice.device_trust(bot.user_id, device)
    assert trust is not None and trust["cross_signing_verified"], trust

    gate.release.set()
    await seen(alice, room, bot.user_id, lambda messages: shows(messages, ANSWER))
    thanks = await alice.send_text(room, "thanks!")
    messages = await seen(
        alice,
        room,
        bot.user_id,
        lambda messages: any(m["in_reply_to"] == thanks for m in messages),
    )
    assert [m["body"] for m in messages if m["in_reply_to"] == thanks] == ["Enjoy!"]
    await daemon.wait_event("matrix_verification_done")
    assert await daemon.stop() == 0
    # One answer to the recipe question: the streamed message (its edits aside).
    # One answer to the recipe question: the streamed message, the rest of the bot's room
    # messages its edits (`* ...`; the client shows the edited message without its reply
    # relation), the verification's events and the answer to her thanks.
    answers = [
        m["event_id"]
        for m in messages
        if m["type"] == "m.room.message"
        and not str(m["body"]).startswith("* ")
        and m["in_reply_to"] != thanks
    ]
    assert answers == [partial["event_id"]], messages
    assert len(fake_llm.chat_requests) == 2
    assert "Traceback" not in daemon.log_text()
