"""Media from a human on a real Synapse: images and PDFs in plain and encrypted rooms are
downloaded (decrypted with the event's keys) into the media store and reach the model as an
image part / extracted text; a caption is the text; an oversize file is only named."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squidd.config.media import MediaSettings, TranscriptionSettings
from squidd.llm.transcription import WhisperTranscriber
from squidd.media.reader import MediaReader
from squidd.store.media import MediaStore
from tests.servers.synapse.server import User
from tests.support.matrix import wait_until
from tests.support.matrix_channel import AliceAllowed, run_channel
from tests.support.matrix_files import send_file
from tests.support.media_files import jpeg_with_exif, pdf_with_text, wav_tone
from tests.support.transcription_server import TranscriptionServer

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_image_and_pdf_reach_the_model(
    bot: User, data_dir: Path, encrypted: bool, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    store = MediaStore(data_dir, lifetime_s=3600)
    image, pdf = jpeg_with_exif(640, 480), pdf_with_text("Meeting moved to Thursday 14:00")
    async with run_channel(settings, data_dir, media=store) as (_channel, inbox):
        room = await alice.create_room([bot.user_id], encrypted=encrypted, direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.sync()
        await send_file(
            alice,
            room,
            image,
            msgtype="m.image",
            name="cat.jpg",
            mime="image/jpeg",
            encrypted=encrypted,
            body="look at my cat",
        )
        await send_file(
            alice,
            room,
            pdf,
            msgtype="m.file",
            name="minutes.pdf",
            mime="application/pdf",
            encrypted=encrypted,
        )
        await wait_until(lambda: len(inbox.received) == 2, "both media messages")
    first, second = inbox.received
    assert first.text == "look at my cat" and second.text == "[file: minutes.pdf]"
    [cat], [minutes] = first.attachments, second.attachments
    assert cat.path and Path(cat.path).read_bytes() == image  # decrypted, byte for byte
    assert cat.sha256 == hashlib.sha256(image).hexdigest()
    assert Path(cat.path).is_relative_to(data_dir / "media")
    model = MediaReader(MediaSettings(), vision=True, transcriber=None)
    seen = await model.read([cat, minutes])
    assert [url[:23] for url in seen.images] == ["data:image/jpeg;base64,"]
    assert "Meeting moved to Thursday 14:00" in seen.text


async def test_an_oversize_file_is_only_named(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    store = MediaStore(data_dir, lifetime_s=3600)
    async with run_channel(settings, data_dir, media=store, max_download_bytes=1000) as (
        _channel,
        inbox,
    ):
        room = await alice.create_room([bot.user_id], direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await send_file(
            alice,
            room,
            b"z" * 5000,
            msgtype="m.file",
            name="big.bin",
            mime="application/octet-stream",
            encrypted=False,
        )
        await wait_until(lambda: len(inbox.received) == 1, "the media message")
    [att] = inbox.received[0].attachments
    assert (att.note, att.size, att.path) == ("too large", 5000, None)
    assert not (data_dir / "media").exists() or not any((data_dir / "media").rglob("*.*"))
    seen = await MediaReader(MediaSettings(), vision=True, transcriber=None).read([att])
    assert "big.bin" in seen.text and "too large" in seen.text


async def test_a_voice_note_reaches_the_model_as_its_transcript(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    store = MediaStore(data_dir, lifetime_s=3600)
    voice = wav_tone()
    async with run_channel(settings, data_dir, media=store) as (_channel, inbox):
        room = await alice.create_room([bot.user_id], encrypted=True, direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.sync()
        await send_file(
            alice,
            room,
            voice,
            msgtype="m.audio",
            name="voice.wav",
            mime="audio/wav",
            encrypted=True,
        )
        await wait_until(lambda: len(inbox.received) == 1, "the voice note")
    [inbound] = inbox.received
    assert inbound.text == "[voice note]"
    with TranscriptionServer(text="call the plumber tomorrow") as whisper:
        transcriber = WhisperTranscriber(TranscriptionSettings(base_url=whisper.base_url))
        try:
            reader = MediaReader(MediaSettings(), vision=True, transcriber=transcriber)
            seen = await reader.read(inbound.attachments)
        finally:
            await transcriber.aclose()
    assert seen.text == "[voice note, transcribed]: call the plumber tomorrow"
    assert whisper.heard[0].file_bytes == voice  # decrypted before it was transcribed
