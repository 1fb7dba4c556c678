"""Voice replies through `squidd run` on a real Synapse: alice sends a voice message (m.audio)
in an encrypted DM; the answer arrives as text and then as a voice note (m.audio with the
fields Element shows as one) whose file downloads, decrypts and decodes as Ogg/Opus of the
duration it claims; the scripted speech endpoint saw the answer's text. With the speech
endpoint failing, the text still arrives, once, and no voice note; status shows why."""

from __future__ import annotations

import io
import json
from typing import Any

import anyio.to_thread
import pytest
import soundfile

from squidd.gateway.status import SOCKET_NAME, ask
from tests.support.daemon import DaemonProcess
from tests.support.matrix import Human, Seen
from tests.support.matrix_daemon import MatrixScene, user_texts
from tests.support.matrix_files import downloaded, send_file
from tests.support.speech_server import SpeechServer, ogg_opus_tone
from tests.support.transcription_server import TranscriptionServer

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

ANSWER = "The plumber comes on Thursday at nine. I put it in your calendar."
SPEECH_KEY = "sk-speech-voice-test-5150"
QUESTION = "when does the plumber come"


async def status_of(scene: MatrixScene) -> dict[str, Any]:
    """The running daemon's status, asked on its socket."""
    path = scene.tmp_path / "data" / SOCKET_NAME
    return await anyio.to_thread.run_sync(ask, path, {"op": "status"})


def voice_notes(human: Human, bot_id: str, room: str) -> list[Seen]:
    return [s for s in human.from_sender(bot_id, room) if s.content.get("msgtype") == "m.audio"]


def texts(human: Human, bot_id: str, room: str) -> list[str]:
    return [
        s.content["body"]
        for s in human.from_sender(bot_id, room)
        if s.content.get("msgtype") in ("m.text", "m.notice")
    ]


async def _voice_dm(
    scene: MatrixScene, speech: SpeechServer, whisper: TranscriptionServer
) -> tuple[Human, str, DaemonProcess]:
    """alice's encrypted DM with the bot, the daemon (speaking through `speech`) started,
    and alice's voice message sent in it."""
    alice = await scene.make_human("alice")
    _config, daemon = await scene.matrix_squidd.start(
        alice.user_id,
        transcription={"base_url": whisper.base_url},
        speech={"base_url": speech.base_url, "api_key": SPEECH_KEY, "voice": "nova"},
    )
    room = await alice.room_with(scene.bot.user_id, encrypted=True)
    await send_file(
        alice,
        room,
        ogg_opus_tone(1.5),
        msgtype="m.audio",
        name="Voice message.ogg",
        mime="audio/ogg",
        encrypted=True,
    )
    return alice, room, daemon


async def test_a_voice_message_is_answered_in_text_and_as_a_voice_note(scene: MatrixScene) -> None:
    scene.fake_llm.push(ANSWER)
    with SpeechServer() as speech, TranscriptionServer(text=QUESTION) as whisper:
        alice, room, daemon = await _voice_dm(scene, speech, whisper)
        bot_id = scene.bot.user_id
        await alice.wait_for(lambda: len(voice_notes(alice, bot_id, room)) == 1, "the voice note")
        await daemon.wait_event("reply_sent")
        status = await status_of(scene)
        assert await daemon.stop() == 0
    assert texts(alice, bot_id, room) == [ANSWER]  # the text once, before its voice note
    kinds = [s.content.get("msgtype") for s in alice.from_sender(bot_id, room)]
    assert kinds.index("m.text") < kinds.index("m.audio")
    assert speech.texts == [ANSWER]
    assert speech.heard[0].request["voice"] == "nova"
    assert f"[voice note, transcribed]: {QUESTION}" in user_texts(scene.fake_llm)[0]
    [note] = voice_notes(alice, bot_id, room)
    content: dict[str, Any] = note.content
    assert content["org.matrix.msc3245.voice"] == {}
    assert content["info"]["mimetype"] == "audio/ogg"
    claimed = content["info"]["duration"]
    audio = content["org.matrix.msc1767.audio"]
    assert audio["duration"] == claimed
    assert len(audio["waveform"]) >= 30
    assert all(isinstance(v, int) and 0 <= v <= 1024 for v in audio["waveform"])
    assert "url" not in content and "file" in content  # encrypted in an encrypted room
    assert content["org.matrix.msc1767.file"]["file"] == content["file"]
    assert content["org.matrix.msc1767.text"] == content["body"]
    data = await downloaded(alice, note)
    decoded = soundfile.info(io.BytesIO(data))
    assert (decoded.format, decoded.subtype) == ("OGG", "OPUS")
    assert abs(decoded.duration * 1000 - claimed) <= 1
    frames, _rate = soundfile.read(io.BytesIO(data))
    assert len(frames) > 0
    assert status["speech"]["spoken"] == 1 and status["speech"]["failed"] == 0


@pytest.mark.parametrize(
    "speech",
    [SpeechServer(status=503), SpeechServer(body=b"<html>Bad Gateway</html>")],
    ids=["5xx", "not-ogg"],
)
async def test_with_speech_failing_the_text_arrives_once_and_no_voice_note(
    scene: MatrixScene, speech: SpeechServer
) -> None:
    scene.fake_llm.push(ANSWER)
    with speech, TranscriptionServer(text=QUESTION) as whisper:
        alice, room, daemon = await _voice_dm(scene, speech, whisper)
        bot_id = scene.bot.user_id
        await daemon.wait_event("speech_failed")
        await alice.wait_for(lambda: texts(alice, bot_id, room) == [ANSWER], "the text answer")
        await daemon.wait_event("reply_sent")
        status = await status_of(scene)
        assert await daemon.stop() == 0
    await alice.sync()
    assert texts(alice, bot_id, room) == [ANSWER]
    assert voice_notes(alice, bot_id, room) == []
    assert speech.texts == [ANSWER]
    assert status["speech"]["failed"] == 1 and status["speech"]["last_failure"]["reason"]
    [warning] = [e for e in daemon.events() if e.get("event") == "speech_failed"]
    assert warning["level"] == "warning"
    assert SPEECH_KEY not in daemon.log_text() and SPEECH_KEY not in json.dumps(status)
