"""Files the assistant sends, on a real Synapse: a reply's files arrive as `m.image` /
`m.file` events the human downloads (and, in an encrypted room, decrypts) to the same
bytes; the same pending reply delivered twice shows each file once; a file over the
homeserver's `m.upload.size` gets a notice in the room, not a silent failure; and through
`squidd run`, the model's send_file call reaches the human as a decryptable file."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squidd.channels.matrix.upload import upload_limit
from squidd.core.models import Inbound, Outbound
from squidd.core.reply_files import FileRef
from squidd.errors import DeliveryError
from tests.servers.synapse.server import User
from tests.support.fake_llm import Reply
from tests.support.matrix import Human, Seen, wait_until
from tests.support.matrix_channel import AliceAllowed, run_channel
from tests.support.matrix_daemon import MatrixScene, matrix_daemon_config
from tests.support.matrix_files import downloaded
from tests.support.media_files import jpeg_with_exif, pdf_with_text

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


def file_ref(path: Path, kind: str, mime: str) -> FileRef:
    data = path.read_bytes() if path.stat().st_size < 1024 * 1024 else b""
    return FileRef(
        path=str(path),
        kind=kind,  # type: ignore[arg-type]
        mime=mime,
        size=path.stat().st_size,
        sha256=hashlib.sha256(data).hexdigest(),
        name=path.name,
    )


def reply(message: Inbound, text: str, *files: FileRef) -> Outbound:
    return Outbound(
        channel="matrix",
        target=message.session_id,
        text=text,
        session_id=message.session_id,
        in_reply_to=message,
        files=files,
    )


def media_events(human: Human, bot: User, room: str) -> list[Seen]:
    return [
        s
        for s in human.from_sender(bot.user_id, room)
        if s.content.get("msgtype") in ("m.image", "m.file")
    ]


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_the_files_of_a_reply_arrive_downloadable(
    bot: User, data_dir: Path, tmp_path: Path, encrypted: bool, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    image, pdf = tmp_path / "chart.jpg", tmp_path / "report.pdf"
    image.write_bytes(jpeg_with_exif(800, 600))
    pdf.write_bytes(pdf_with_text("Quarterly numbers"))
    refs = (file_ref(image, "image", "image/jpeg"), file_ref(pdf, "file", "application/pdf"))
    async with run_channel(settings, data_dir) as (channel, inbox):
        room = await alice.create_room([bot.user_id], encrypted=encrypted, direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.sync()
        await alice.send(room, "send me the report")
        await wait_until(lambda: len(inbox.acked) == 1, "the question answered")
        await channel.send(reply(inbox.received[0], "Here they are.", *refs))
        await alice.wait_for(lambda: len(media_events(alice, bot, room)) == 2, "two files")
    shown, sent = media_events(alice, bot, room), [image, pdf]
    assert [s.content["msgtype"] for s in shown] == ["m.image", "m.file"]
    assert [s.content["body"] for s in shown] == ["chart.jpg", "report.pdf"]
    for seen, path in zip(shown, sent, strict=True):
        assert seen.event.source["type"] == "m.room.message"
        assert ("file" in seen.content) is encrypted and ("url" in seen.content) is not encrypted
        assert seen.content["info"]["size"] == path.stat().st_size
        assert await downloaded(alice, seen) == path.read_bytes()
    info = shown[0].content["info"]
    assert (info["w"], info["h"], info["mimetype"]) == (800, 600, "image/jpeg")
    thumb = info["thumbnail_file" if encrypted else "thumbnail_url"]
    assert thumb and info["thumbnail_info"]["w"] == 320


async def test_a_20_mb_file_is_streamed_encrypted_and_opens_byte_for_byte(
    bot: User, data_dir: Path, tmp_path: Path, alice_allowed: AliceAllowed
) -> None:
    """Encrypted on its way to the homeserver: the process never holds the file (the old
    way held it and its ciphertext, 2 x 20 MB); Alice's nio decrypts it to the same bytes."""
    alice, settings = alice_allowed
    big = tmp_path / "archive.bin"
    with big.open("wb") as handle:
        for _ in range(20):
            handle.write(os.urandom(1024 * 1024))
    async with run_channel(settings, data_dir) as (channel, inbox):
        room = await alice.create_room([bot.user_id], encrypted=True, direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.sync()
        await alice.send(room, "the archive please")
        await wait_until(lambda: len(inbox.acked) == 1, "the question answered")
        await channel.send(reply(inbox.received[0], "Warming up."))  # first use off the count
        ref = file_ref(big, "file", "application/octet-stream")
        tracemalloc.start()
        try:
            await channel.send(reply(inbox.received[0], "Here it is.", ref))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        await alice.wait_for(lambda: len(media_events(alice, bot, room)) == 1, "the file")
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes while sending 20 MB"
    [shown] = media_events(alice, bot, room)
    assert shown.content["info"]["size"] == 20 * 1024 * 1024
    file = shown.content["file"]
    assert file["v"] == "v2" and file["key"]["alg"] == "A256CTR"
    got = await downloaded(alice, shown)  # nio's decrypt_attachment checks the hash first
    assert hashlib.sha256(got).digest() == hashlib.sha256(big.read_bytes()).digest()


async def test_the_same_pending_reply_delivered_twice_shows_its_file_once(
    bot: User, data_dir: Path, tmp_path: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(pdf_with_text("once"))
    async with run_channel(settings, data_dir) as (channel, inbox):
        room = await alice.create_room([bot.user_id], encrypted=True, direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.sync()
        await alice.send(room, "the report please")
        await wait_until(lambda: len(inbox.acked) == 1, "the question answered")
        question = inbox.received[0]
        again = reply(question, "Attached.", file_ref(pdf, "file", "application/pdf"))
        await channel.send(again)  # then the daemon dies before recording it as sent ...
        await channel.send(again)  # ... and the outbox entry is delivered again
        await channel.send(reply(question, "marker after both"))
        await alice.wait_for(
            lambda: any(s.content.get("body") == "marker after both" for s in alice.events),
            "the marker",
        )
    assert len(media_events(alice, bot, room)) == 1
    bodies = [s.content.get("body") for s in alice.from_sender(bot.user_id, room)]
    assert bodies.count("Attached.") == 1


async def test_a_file_over_the_upload_limit_gets_a_notice(
    bot: User, data_dir: Path, tmp_path: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (channel, inbox):
        assert channel.client is not None  # the server's limit, as the bot sees it
        limit = await upload_limit(channel.client)
        assert limit is not None
        big = tmp_path / "huge.bin"
        with big.open("wb") as handle:  # sparse: the size is what counts, not the disk
            handle.truncate(limit + 1)
        room = await alice.create_room([bot.user_id], direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.send(room, "the big one")
        await wait_until(lambda: len(inbox.acked) == 1, "the question answered")
        ref = FileRef(str(big), "file", "application/octet-stream", limit + 1, "0" * 64, big.name)
        await channel.send(reply(inbox.received[0], "Sending it.", ref))
        await alice.wait_for(
            lambda: any("upload limit" in s.content.get("body", "") for s in alice.events),
            "the too-large notice",
        )
    assert media_events(alice, bot, room) == []
    [notice] = [s for s in alice.events if "upload limit" in s.content.get("body", "")]
    assert "huge.bin" in notice.content["body"]
    os.unlink(big)


@pytest.mark.slow
async def test_send_file_through_the_daemon_reaches_an_encrypted_room(
    scene: MatrixScene,
) -> None:
    alice = await scene.make_human("alice")
    config = matrix_daemon_config(
        scene.tmp_path, scene.fake_llm, scene.synapse, scene.bot, alice.user_id
    )
    workspace = scene.tmp_path / "data" / "workspace"
    workspace.mkdir(parents=True)
    report = pdf_with_text("Minutes of Thursday")
    (workspace / "minutes.pdf").write_bytes(report)
    scene.fake_llm.push(Reply(tool_calls=[("send_file", {"path": "minutes.pdf"})]), "The minutes.")
    daemon = await scene.matrix_squidd.again(config, "squidd-1.log")
    room = await alice.room_with(scene.bot.user_id, encrypted=True)
    await alice.send(room, "the minutes please")
    await alice.wait_for(lambda: len(media_events(alice, scene.bot, room)) == 1, "the file")
    await daemon.wait_event("reply_sent")
    assert await daemon.stop() == 0
    [shown] = media_events(alice, scene.bot, room)
    assert shown.content["msgtype"] == "m.file" and "file" in shown.content
    assert shown.content["body"] == "minutes.pdf"
    assert await downloaded(alice, shown) == report
    bodies = [s.content.get("body") for s in alice.from_sender(scene.bot.user_id, room)]
    assert bodies.count("The minutes.") == 1


async def test_a_streamed_answer_whose_file_fails_is_not_shown_twice(
    bot: User, data_dir: Path, tmp_path: Path, alice_allowed: AliceAllowed
) -> None:
    """The answer streamed by edits; its final edit goes out, then its file cannot be read
    (a directory stands where it was): the send fails and is retried as it is — the text is
    never sent again as a new message. Once the file is back, the retry edits again (the
    same transaction ids: no new event) and the file follows."""
    alice, settings = alice_allowed
    settings = settings.model_copy(update={"streaming": "edits", "debounce_ms": 0})
    voice = tmp_path / "voice.ogg"
    whole = b"OggS" + bytes(range(256)) * 8
    voice.write_bytes(whole)
    ref = file_ref(voice, "file", "audio/ogg")
    voice.unlink()
    voice.mkdir()  # there, but no file to read
    text = "The weather: " + "sunny and mild, " * 20
    async with run_channel(settings, data_dir) as (channel, inbox):
        room = await alice.create_room([bot.user_id], direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.send(room, "the weather please")
        await wait_until(lambda: len(inbox.received) == 1, "the question")
        question = inbox.received[0]
        stream = channel.partials(question)
        assert stream is not None
        await stream.text(text)
        await alice.wait_for(
            lambda: any(
                s.content.get("msgtype") == "m.text" for s in alice.from_sender(bot.user_id, room)
            ),
            "the streamed start",
        )
        answer = reply(question, text + "the end.", ref)
        with pytest.raises(DeliveryError):
            await channel.send(answer)
        voice.rmdir()
        voice.write_bytes(whole)
        await channel.send(answer)  # the retry
        await alice.wait_for(lambda: len(media_events(alice, bot, room)) == 1, "the file")
    messages = [
        s
        for s in alice.from_sender(bot.user_id, room)
        if s.content.get("msgtype") == "m.text"
        and (s.content.get("m.relates_to") or {}).get("rel_type") != "m.replace"
        and str(s.content.get("body")).startswith("The weather:")
    ]
    assert len(messages) == 1, [m.content for m in messages]  # the streamed one, only
    edits = [
        s
        for s in alice.from_sender(bot.user_id, room)
        if (s.content.get("m.relates_to") or {}).get("rel_type") == "m.replace"
    ]
    assert edits and all(
        e.content["m.new_content"]["body"].startswith("The weather:") for e in edits
    )
    finals = [e for e in edits if e.content["m.new_content"]["body"].endswith("the end.")]
    assert len(finals) == 1  # sent twice, shown once: the same transaction ids
