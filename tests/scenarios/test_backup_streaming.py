"""A backup taken while an answer streams into a Matrix chat, restored on another machine."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support.fake_llm import Gate, Reply
from tests.support.matrix import start_squidd, wait_until
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import (
    Chat,
    handled_ids,
    history,
    matrix_config,
    outbox,
    squidd,
)

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

ANSWER = "\n\n".join(
    f"Part {i} of the garden plan: dig, sow, water, wait and then dig some more." for i in range(12)
)


def contents(data_dir: Path, role: str, text: str) -> int:
    return sum(1 for m in history(data_dir) if m.get("role") == role and m.get("content") == text)


@pytest.mark.parametrize("next_message", ["after", "at_once"])
async def test_a_backup_mid_stream_restored_elsewhere_holds_the_answer_once(
    next_message: str,
    scene: MatrixScene,
) -> None:
    """Alice asks her bot for a garden plan; its answer streams into her chat, the message
    growing by edits. Halfway through, her nightly `squidd backup create` runs. The answer
    finishes. Later the machine is gone: she restores the backup into an empty folder on a
    new one and starts the bot from it. The message that was streaming when the backup was
    taken is finished in place — one answer in her chat, never a second message — and the
    restored bot holds that exchange once: once in the history, once in the record of
    handled messages, nothing left or doubled in its outbox. Her next message is answered
    as usual — also when she sends it the moment the bot is back, while her old question
    comes back to it: the two are not merged into one answer (the old one's answer had
    begun; it is finished, and the new one gets its own)."""
    gate = Gate()
    streamed = Reply(content=ANSWER, piece_chars=40, gate=gate, gate_after=400)
    # The restored bot asks the model again (an answer without tools is not journaled).
    scene.fake_llm.push(streamed, streamed)
    alice = await scene.make_human("alice")
    old = scene.tmp_path / "old"
    old.mkdir()
    config = matrix_config(old, scene.fake_llm.base_url, scene.synapse, scene.bot, [alice.user_id])
    first = await start_squidd(scene.squidds, config, old / "squidd.log")
    room = await alice.room_with(scene.bot.user_id)
    chat = Chat(alice, scene.bot.user_id, room)
    asked = await alice.send(room, "plan my garden")
    assert await anyio.to_thread.run_sync(gate.reached.wait, 60)
    await alice.wait_for(lambda: bool(chat.replies(asked)), "the answer starting to show")
    assert chat.replies(asked)[0][1] != ANSWER  # still streaming

    archive = scene.tmp_path / "nightly.tar.gz"
    made = await anyio.to_thread.run_sync(
        lambda: squidd(config, "backup", "create", str(archive), "--verify")
    )
    assert "verified" in made
    gate.release.set()
    await alice.wait_for(lambda: chat.replies(asked)[0][1] == ANSWER, "the whole answer", 60)
    [(message, _)] = chat.replies(asked)
    assert await first.stop() == 0

    new = scene.tmp_path / "new"
    new.mkdir()
    restored = new / "data"
    squidd(config, "backup", "restore", str(archive), "--target", str(restored))
    assert contents(restored, "assistant", ANSWER) == 0  # the turn was not done yet
    names = [(r.get("source_channel"), r.get("source_id")) for r in outbox(restored)]
    assert len(names) == len(set(names))

    config_new = matrix_config(
        new, scene.fake_llm.base_url, scene.synapse, scene.bot, [alice.user_id]
    )
    second = await start_squidd(scene.squidds, config_new, new / "squidd.log")
    # Her question comes back to the restored bot (it was not answered when the backup ran).
    if next_message == "after":
        await wait_until(lambda: asked in handled_ids(restored), "the question handled", 60)
    scene.fake_llm.push("Good night.")
    later = await alice.send(room, "thanks, good night")
    assert await chat.wait_reply(later) == "Good night."
    await wait_until(lambda: asked in handled_ids(restored), "the question handled", 60)
    assert await second.stop() == 0

    assert [m.event.event_id for m, _ in chat.replies(asked)] == [message.event.event_id]
    assert chat.replies(asked)[0][1] == ANSWER
    assert contents(restored, "user", "plan my garden") == 1
    assert contents(restored, "assistant", ANSWER) == 1
    ids = handled_ids(restored)
    assert ids.count(asked) == 1 and ids.count(later) == 1, ids
    assert outbox(restored) == []
