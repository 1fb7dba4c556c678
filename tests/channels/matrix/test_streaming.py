"""Streaming by edits against a real Synapse with its stock rate limits (`rc_message`: 0.2
events/s after a burst of 10), with `squidd run` as a real process
and the scripted LLM writing a 2,000-character answer slowly, piece by piece: one message
plus edits, the last of which shows the whole reply (rendered as a normal reply), and not
one request refused with 429."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.servers.synapse.server import SynapseServer, User
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix_daemon import MakePerson, MatrixSquidd
from tests.support.matrix_streams import answer_text, stock_synapse, streamed

# One worker runs the whole module: it starts the module's own homeserver once.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.matrix,
    pytest.mark.slow,
    pytest.mark.xdist_group("stock-synapse-streaming"),
]


@pytest.fixture(scope="module")
def synapse() -> Iterator[SynapseServer]:
    """A homeserver of its own for this module, with Synapse's stock rate limits."""
    with stock_synapse() as server:
        yield server


def sends(synapse: SynapseServer, user_id: str) -> list[tuple[str, int]]:
    return [(line, status) for line, status in synapse.requests(user_id) if "/send/" in line]


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_long_answer_streams_as_one_message_and_its_edits_without_a_429(
    synapse: SynapseServer,
    bot: User,
    make_human: MakePerson,
    fake_llm: FakeLLM,
    encrypted: bool,
    matrix_squidd: MatrixSquidd,
) -> None:
    text = answer_text(33)[:2000].rstrip()
    assert len(text) >= 1990
    fake_llm.push(Reply(content=text, piece_chars=40, piece_delay=0.5))
    alice = await make_human("alice")
    _, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await alice.room_with(bot.user_id, encrypted=encrypted)
    asked = await alice.send(room, "tell me a long story")

    def finished() -> bool:
        return bool(streamed(alice, bot.user_id, room, asked).complete(text))

    await alice.wait_for(finished, "the whole answer", timeout=90)
    assert await daemon.stop() == 0

    seen = streamed(alice, bot.user_id, room, asked)
    [reply] = seen.replies  # one message ...
    first = reply.event.event_id
    edits = seen.edits[first]  # ... and its edits
    assert 3 <= len(edits) <= 41
    assert not seen.others
    assert len(reply.content["body"]) < len(text)  # the first chunk, not the answer
    final: dict[str, Any] = edits[-1].content
    assert final["m.new_content"]["body"] == text
    assert "<strong>streamed</strong>" in final["m.new_content"]["formatted_body"]
    assert final["body"] == "* " + text
    assert final["m.relates_to"] == {"rel_type": "m.replace", "event_id": first}
    if encrypted:
        assert all(getattr(e.event, "decrypted", False) for e in (reply, *edits))
    requests = sends(synapse, bot.user_id)
    assert requests, "the access log shows the bot's sends"
    assert [r for r in requests if r[1] == 429] == []
    assert daemon.count("matrix_stream_stopped") == 0
    print(f"streamed {len(text)} chars: 1 message + {len(edits)} edits, {len(requests)} sends")
