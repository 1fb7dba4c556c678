"""Scenario l (tests/scenarios/README.md): answers you can hear, through `squidd run` on
Synapse, across agents, streaming, rooms and the usage ledger."""

from __future__ import annotations

import anyio.to_thread
import pytest

from tests.support.daemon import run_squidd
from tests.support.fake_llm import Gate, Reply
from tests.support.matrix import Human, Seen, start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.matrix_files import send_file
from tests.support.scenario import Chat, matrix_config
from tests.support.speech_server import SpeechServer, ogg_opus_tone

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

NEWS = (
    "Good morning. Rain until noon, then sun. The trains run on time today, "
    "and the library opens late because of the holiday."
)
HOME = "The heating is set to 20 degrees."
NEWS_AGENT = {"name": "news", "voice_reply": "always"}
PRICED = {"price_per_1m_chars": 15.0}


async def test_the_news_agent_speaks_a_streamed_answer_and_a_quiet_room_stays_written(
    scene: MatrixScene,
) -> None:
    """Alice has two chats with her assistant. In the encrypted "news" chat, which belongs
    to the `news` agent (it always answers aloud), she types a question: the answer streams
    into the chat as it is written and, once it is whole, the same words follow as a voice
    note she can play. In her "home" chat she has told it never to speak, so when she sends
    a voice message there the answer comes as text only. Afterwards `squidd usage` shows
    what the speech cost and `squidd status` counts the answer spoken."""
    gate = Gate()
    scene.fake_llm.push(Reply(content=NEWS, piece_chars=20, gate=gate, gate_after=40), HOME)
    alice = await scene.make_human("alice")
    bot = scene.bot.user_id
    news = await alice.create_room([bot], encrypted=True, direct=True)
    home = await alice.create_room([bot], direct=True)
    with SpeechServer() as speech:
        config = matrix_config(
            scene.tmp_path,
            scene.fake_llm.base_url,
            scene.synapse,
            scene.bot,
            [alice.user_id],
            matrix={"debounce_ms": 0, "stream_first_chars": 10},
            agents={
                "list": [
                    {"name": "main"},
                    {"name": "news", "rooms": [news], "voice_reply": "always"},
                ]
            },
            speech={
                "base_url": speech.base_url,
                "rooms": {home: "never"},
                "price_per_1m_chars": 15.0,
            },
        )
        daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd.log")
        for room in (news, home):
            await alice.wait_for(lambda r=room: alice.membership(r, bot) == "join", "the bot joins")
        await alice.sync()

        chat = Chat(alice, bot, news)
        asked = await alice.send(news, "what is new today?")
        assert await anyio.to_thread.run_sync(gate.reached.wait, 60)
        await alice.wait_for(lambda: bool(chat.replies(asked)), "the answer starting to show")
        assert chat.replies(asked)[0][1] != NEWS  # still streaming: no voice note yet
        assert speech.heard == []
        gate.release.set()
        await alice.wait_for(lambda: len(notes(alice, bot, news)) == 1, "the voice note")
        [note] = notes(alice, bot, news)
        replies = chat.replies(asked)  # the voice note replies to her question too
        assert [text for seen, text in replies if seen is not note] == [NEWS]  # one text
        assert replies[-1][0] is note  # after the finished text
        assert "file" in note.content and note.content["org.matrix.msc3245.voice"] == {}

        said = await send_file(
            alice,
            home,
            ogg_opus_tone(1.0),
            msgtype="m.audio",
            name="Voice message.ogg",
            mime="audio/ogg",
            encrypted=False,
        )
        home_chat = Chat(alice, bot, home)
        await alice.wait_for(lambda: home_chat.replies(said) != [], "the answer at home")
        await daemon.wait_event("reply_sent", count=2)
        usage = run_squidd(config, "usage", "--by", "purpose")
        status = run_squidd(config, "status")
        assert await daemon.stop() == 0

    await alice.sync()
    assert [text for _, text in home_chat.replies(said)] == [HOME]
    assert notes(alice, bot, home) == []  # the room's "never" wins over a voice message
    assert speech.texts == [NEWS.replace("\n", " ")]
    by_purpose = usage.stdout.split("by purpose:")[1]
    speech_line = next(line for line in by_purpose.splitlines() if "speech" in line)
    assert str(len(NEWS)) in speech_line
    assert "speech: 1 spoken, 0 failed" in status.stdout


def notes(human: Human, bot: str, room: str) -> list[Seen]:
    return [s for s in human.from_sender(bot, room) if s.content.get("msgtype") == "m.audio"]
