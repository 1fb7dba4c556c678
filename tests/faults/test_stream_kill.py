"""SIGKILL in the middle of a streamed Matrix answer (a real Synapse with its stock rate
limits, `squidd run` as a real process, the scripted LLM writing slowly): after the restart
exactly one complete answer is visible — the streamed message, finished by the resumed
turn's final edit — never a second message; the message's event id was on disk before the
kill, and nothing of the stream is left on disk once the answer went out."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.servers.synapse.server import SynapseServer
from tests.support.fake_llm import Reply
from tests.support.matrix import wait_until
from tests.support.matrix_daemon import MatrixScene
from tests.support.matrix_streams import answer_text, stock_synapse, streamed

# One worker runs the whole module: it starts the module's own homeserver once.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.matrix,
    pytest.mark.slow,
    pytest.mark.xdist_group("stock-synapse-stream-kill"),
]


@pytest.fixture(scope="module")
def synapse() -> Iterator[SynapseServer]:
    with stock_synapse() as server:
        yield server


async def test_sigkill_mid_stream_leaves_one_complete_answer(
    scene: MatrixScene,
) -> None:
    text = answer_text(16)
    # The model is asked again after the restart (an answer without tools is not journaled).
    scene.fake_llm.push(*[Reply(content=text, piece_chars=30, piece_delay=0.4)] * 2)
    alice = await scene.make_human("alice")
    config, first = await scene.matrix_squidd.start(alice.user_id, "squidd-1.log")
    room = await alice.room_with(scene.bot.user_id)
    asked = await alice.send(room, "write slowly")

    def partly_shown() -> bool:
        seen = streamed(alice, scene.bot.user_id, room, asked)
        return any(seen.edits.get(r.event.event_id) for r in seen.replies)

    await alice.wait_for(partly_shown, "the first chunk and an edit", timeout=60)
    await first.stop(signal.SIGKILL)
    records = scene.tmp_path / "data" / "matrix" / "streams"
    [record] = list(records.glob("*.json"))
    streamed_id = streamed(alice, scene.bot.user_id, room, asked).replies[0].event.event_id
    assert streamed_id in record.read_text()

    second = await scene.matrix_squidd.again(config, "squidd-2.log")
    await alice.wait_for(
        lambda: bool(streamed(alice, scene.bot.user_id, room, asked).complete(text)),
        "the whole answer after the restart",
        timeout=90,
    )
    later = await alice.send(room, "later")
    await alice.wait_for(lambda: alice.replies_to(scene.bot.user_id, later), "reply to later")
    await wait_until(lambda: not list(records.glob("*.json")), "the stream record dropped")
    assert await second.stop() == 0

    seen = streamed(alice, scene.bot.user_id, room, asked)
    assert [r.event.event_id for r in seen.replies] == [streamed_id]
    assert seen.complete(text) == [streamed_id]
    assert all(
        (o.content.get("m.relates_to") or {}).get("m.in_reply_to", {}).get("event_id") == later
        for o in seen.others
    )
    assert len(scene.fake_llm.chat_requests) == 3  # the cut turn, its rerun, "later"
