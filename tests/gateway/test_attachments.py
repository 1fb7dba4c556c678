"""Attachments through the daemon: the model gets image parts and extracted text for the
turn; the history keeps references (path, type, size, hash), never the bytes; send_file
puts a file on the delivered reply, unless the tool policy withholds it."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from squidd.store.media import MediaStore
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.media_files import jpeg_with_exif, pdf_with_text, wav_tone
from tests.support.memory_channel import MemoryChannel
from tests.support.transcription_server import TranscriptionServer

pytestmark = pytest.mark.anyio


async def once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def user_content(request: dict[str, Any]) -> Any:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


async def test_image_and_pdf_reach_the_model_and_history_keeps_references(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    settings = make_settings(data, fake_llm.base_url, llm={"vision": True})
    store = MediaStore(data, lifetime_s=3600)
    image = await store.save(
        "room",
        kind="image",
        name="cat.jpg",
        mime="image/jpeg",
        chunks=once(jpeg_with_exif(800, 600)),
        max_bytes=10**7,
    )
    pdf = await store.save(
        "room",
        kind="file",
        name="r.pdf",
        mime="application/pdf",
        chunks=once(pdf_with_text("Quarterly figure 8472")),
        max_bytes=10**7,
    )
    channel = MemoryChannel("memory")
    fake_llm.push("a cat and a report", "again")
    async with running_daemon(settings, [channel]):
        channel.inject("what is this?", session="room", attachments=(image, pdf))
        await channel.wait_for(1, what="acked")
        channel.inject("and now?", session="room")
        await channel.wait_for(2, what="acked")
    first = user_content(fake_llm.chat_requests[0])
    assert isinstance(first, list) and first[0]["type"] == "text"
    assert "Quarterly figure 8472" in first[0]["text"] and "what is this?" in first[0]["text"]
    assert [p["image_url"]["url"][:23] for p in first[1:]] == ["data:image/jpeg;base64,"]
    # the next turn's history: the references, not the image nor the PDF's text
    history = fake_llm.chat_requests[1]["messages"]
    assert all(isinstance(m["content"], str | None) for m in history)
    assert not any("Quarterly" in (m["content"] or "") for m in history)
    [jsonl] = (data / "sessions").rglob("*.jsonl")
    stored = jsonl.read_text()
    assert image.sha256 in stored and str(pdf.path) in stored
    assert "base64" not in stored and "Quarterly" not in stored and len(stored) < 3000


async def test_a_voice_note_reaches_the_model_as_its_transcript(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    with TranscriptionServer(text="please water the plants") as whisper:
        settings = make_settings(
            data, fake_llm.base_url, transcription={"base_url": whisper.base_url}
        )
        store = MediaStore(data, lifetime_s=3600)
        voice = await store.save(
            "room",
            kind="audio",
            name="voice.ogg",
            mime="audio/ogg",
            chunks=once(wav_tone()),
            max_bytes=10**7,
        )
        channel = MemoryChannel("memory")
        fake_llm.push("will do")
        async with running_daemon(settings, [channel]):
            channel.inject("[voice note]", session="room", attachments=(voice,))
            await channel.wait_for(1, what="acked")
    text = user_content(fake_llm.chat_requests[0])
    assert "[voice note, transcribed]: please water the plants" in text
    [jsonl] = (data / "sessions").rglob("*.jsonl")
    assert "please water the plants" in jsonl.read_text()  # the transcript is kept


async def test_send_file_puts_the_file_on_the_delivered_reply(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    settings = make_settings(data, fake_llm.base_url)
    report = settings.workspace_dir / "report.pdf"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_bytes(pdf_with_text("Quarterly figure 8472"))
    channel = MemoryChannel("memory")
    fake_llm.push(Reply(tool_calls=[("send_file", {"path": "report.pdf"})]), "Here it is.")
    async with running_daemon(settings, [channel]):
        channel.inject("send me the report", session="room")
        await channel.wait_for(1, what="acked")
    [sent] = channel.sent
    [ref] = sent.files
    assert sent.text == "Here it is."
    assert (ref.name, ref.mime, ref.size) == (
        "report.pdf",
        "application/pdf",
        report.stat().st_size,
    )
    assert ref.sha256 == hashlib.sha256(report.read_bytes()).hexdigest()
    tool_result = fake_llm.chat_requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and "Attached report.pdf" in tool_result["content"]


async def test_the_tool_policy_can_withhold_send_file(tmp_path: Path, fake_llm: FakeLLM) -> None:
    data = tmp_path / "data"
    rules = [{"channel": "memory", "deny": ["send_file"]}]
    settings = make_settings(data, fake_llm.base_url, tools={"policy": {"rules": rules}})
    channel = MemoryChannel("memory")
    fake_llm.push("no files for you")
    async with running_daemon(settings, [channel]):
        channel.inject("send me the report", session="room")
        await channel.wait_for(1, what="acked")
    offered = [t["function"]["name"] for t in fake_llm.chat_requests[0].get("tools", [])]
    assert "read_file" in offered and "send_file" not in offered
    assert channel.sent[0].files == ()
