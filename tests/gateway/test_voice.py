"""Voice replies (gateway/voice.py) against the scripted speech endpoint, a real media store
and usage ledger: when an answer is spoken (room, agent, section; a voice message; never to
the API or for a cron run), long answers in parts or summarised, usage priced per million
characters, no voice note past a cap, and every failure counted and never raised."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
import soundfile
from structlog.testing import capture_logs

from squidd.commands.status import speech_lines
from squidd.config import Settings
from squidd.config.speech import SpeechSettings
from squidd.core.models import (
    Attachment,
    ChannelName,
    Destination,
    Inbound,
    InboundKind,
    LLMEvent,
    Message,
    SessionId,
    SourceId,
    TextDelta,
    ToolDefinition,
    Usage,
)
from squidd.core.usage import totals
from squidd.gateway.caps import caps_of
from squidd.gateway.costs import prices_of
from squidd.gateway.runtime import build_shared
from squidd.gateway.voice import Summarize, VoiceReplies, summarizer, voice_replies
from squidd.llm.speech import SpeechClient
from squidd.store.media import MediaStore
from squidd.store.usage import UsageLedger
from tests.support.speech_server import SpeechServer, seconds_for

pytestmark = pytest.mark.anyio

VOICE = Attachment("audio", "voice.ogg", "audio/ogg", 100, "ab" * 32, "/x/voice.ogg")
ROOM = "!dm:example.org"


def matrix(
    *, room: str = ROOM, voice: bool = True, kind: InboundKind = InboundKind.MESSAGE
) -> Inbound:
    return Inbound(
        channel=ChannelName("matrix"),
        source_id=SourceId("$ev"),
        session_id=SessionId(f"matrix:{room}"),
        sender="@alice:example.org",
        text="hi",
        reply_to=Destination(ChannelName("matrix"), room),
        attachments=(VOICE,) if voice else (),
        kind=kind,
    )


def other(channel: str, *, voice: bool = True) -> Inbound:
    return Inbound(
        channel=ChannelName(channel),
        source_id=SourceId("m1"),
        session_id=SessionId(f"{channel}:alice"),
        sender="alice@example.org",
        text="hi",
        attachments=(VOICE,) if voice else (),
    )


@pytest.fixture
def speech() -> Iterator[SpeechServer]:
    with SpeechServer() as server:
        yield server


class Scripted:
    """An LLM port that answers every request with `text` (and reports its usage)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.asked: list[str] = []

    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> AsyncIterator[LLMEvent]:
        self.asked.append(str(messages[-1].content))
        yield TextDelta(self.text)
        yield Usage(prompt_tokens=50, completion_tokens=10, model="m")


def replies(
    tmp_path: Path,
    server: SpeechServer,
    *,
    agent: str | None = None,
    cap: str | None = None,
    summarize: Summarize | None = None,
    **keys: object,
) -> tuple[VoiceReplies, SpeechClient, UsageLedger]:
    settings = SpeechSettings(base_url=server.base_url, **keys)  # type: ignore[arg-type]
    client = SpeechClient(settings, max_bytes=1 << 22)
    ledger = UsageLedger(tmp_path)

    async def caps_reached(inbound: Inbound) -> str | None:
        return cap

    voice = VoiceReplies(
        settings,
        client,
        MediaStore(tmp_path, lifetime_s=3600),
        usage=ledger,
        agent_mode=agent,  # type: ignore[arg-type]
        caps_reached=caps_reached,
        summarize=summarize,
    )
    return voice, client, ledger


@pytest.mark.parametrize(
    ("keys", "agent", "inbound", "spoken"),
    [
        ({}, None, matrix(), True),
        ({}, None, matrix(voice=False), False),
        ({"reply": "always"}, None, matrix(voice=False), True),
        ({"reply": "always"}, "never", matrix(), False),
        ({"reply": "never"}, "when-voice", matrix(), True),
        ({"reply": "never", "rooms": {ROOM: "always"}}, "never", matrix(voice=False), True),
        ({"rooms": {ROOM: "never"}}, "always", matrix(), False),
        ({"rooms": {"!other:x": "never"}}, None, matrix(), True),
        ({"reply": "always"}, None, other("email", voice=False), True),
        ({"reply": "always"}, None, other("api"), False),
        ({"reply": "always"}, None, matrix(kind=InboundKind.CRON), False),
        ({"reply": "always"}, None, matrix(kind=InboundKind.HEARTBEAT), False),
    ],
)
async def test_when_an_answer_is_spoken(
    tmp_path: Path,
    speech: SpeechServer,
    keys: dict[str, object],
    agent: str | None,
    inbound: Inbound,
    spoken: bool,
) -> None:
    voice, client, _ = replies(tmp_path, speech, agent=agent, **keys)
    try:
        notes = await voice.notes(inbound, "It is sunny.", "alice")
    finally:
        await client.aclose()
    assert bool(notes) is spoken
    assert speech.texts == (["It is sunny."] if spoken else [])


async def test_a_note_is_kept_privately_measured_and_counted_at_its_price(
    tmp_path: Path, speech: SpeechServer
) -> None:
    voice, client, ledger = replies(tmp_path, speech, model="kokoro")
    answer = "The **oven** is [off](https://x.example)."
    try:
        [note] = await voice.notes(matrix(), answer, "alice")
    finally:
        await client.aclose()
    assert speech.texts == ["The oven is off."]  # read aloud without the markup
    path = Path(note.path)
    assert path.is_relative_to(tmp_path / "media") and path.stat().st_mode & 0o077 == 0
    assert (note.kind, note.mime, note.name, note.size) == (
        "voice",
        "audio/ogg",
        "voice-reply.ogg",
        path.stat().st_size,
    )
    decoded = soundfile.info(io.BytesIO(path.read_bytes()))
    assert abs(decoded.duration * 1000 - note.duration_ms) <= 1
    assert abs(note.duration_ms - seconds_for("The oven is off.") * 1000) <= 1
    [record] = await ledger.today_records()
    assert (record.purpose, record.provider, record.model) == ("speech", "speech", "kokoro")
    assert (record.prompt_tokens, record.person, record.session) == (16, "alice", "matrix:" + ROOM)
    settings = Settings(speech={"model": "kokoro", "price_per_1m_chars": 15.0})  # type: ignore[arg-type]
    assert totals([record], prices_of(settings)).cost == pytest.approx(16 * 15.0 / 1_000_000)
    assert client.health.snapshot()["spoken"] == 1


async def test_a_long_answer_is_spoken_in_parts_up_to_max_parts(
    tmp_path: Path, speech: SpeechServer
) -> None:
    paragraphs = [f"Paragraph {n}. " + "word " * 40 for n in range(5)]
    answer = "\n\n".join(p.strip() for p in paragraphs)
    voice, client, ledger = replies(tmp_path, speech, part_chars=250, max_parts=3)
    try:
        notes = await voice.notes(matrix(), answer, None)
    finally:
        await client.aclose()
    assert [n.name for n in notes] == [f"voice-reply-{i}.ogg" for i in (1, 2, 3)]
    assert [t.split(".")[0] for t in speech.texts] == ["Paragraph 0", "Paragraph 1", "Paragraph 2"]
    assert all(len(t) <= 250 for t in speech.texts)
    assert sum(r.prompt_tokens for r in await ledger.today_records()) == sum(
        len(t) for t in speech.texts
    )


async def test_a_long_answer_is_summarised_first_when_so_configured(
    tmp_path: Path, speech: SpeechServer
) -> None:
    model = Scripted("In short: all is well.")
    ledger = UsageLedger(tmp_path / "summary")
    voice, client, _ = replies(
        tmp_path, speech, long="summary", part_chars=100, summarize=summarizer(model, ledger)
    )
    try:
        [note] = await voice.notes(matrix(), "A long report. " * 20, "alice")
    finally:
        await client.aclose()
    assert speech.texts == ["In short: all is well."]
    assert "at most 100 characters" in model.asked[0] and "A long report." in model.asked[0]
    [used] = await ledger.today_records()
    assert used.purpose == "speech_summary"
    assert note.duration_ms > 0


async def test_past_a_cap_no_voice_note_and_status_says_why(
    tmp_path: Path, speech: SpeechServer
) -> None:
    voice, client, ledger = replies(tmp_path, speech, cap="daily_cost")
    try:
        with capture_logs() as logs:
            assert await voice.notes(matrix(), "hello", None) == ()
    finally:
        await client.aclose()
    assert speech.heard == [] and await ledger.today_records() == []
    [warning] = [e for e in logs if e["event"] == "speech_failed"]
    assert warning["log_level"] == "warning" and "daily_cost" in warning["reason"]
    assert "daily_cost" in client.health.snapshot()["last_failure"]["reason"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        (SpeechServer(status=500), "answered 500"),
        (SpeechServer(body=b"ID3\x04mp3 bytes"), "not Ogg"),
    ],
)
async def test_a_failure_is_counted_and_never_raised(
    tmp_path: Path, server: SpeechServer, reason: str
) -> None:
    with server:
        voice, client, _ = replies(tmp_path, server)
        try:
            assert await voice.notes(matrix(), "hello", None) == ()
        finally:
            await client.aclose()
    health = client.health.snapshot()
    assert health["failed"] == 1 and health["spoken"] == 0
    assert reason in health["last_failure"]["reason"]  # type: ignore[index]
    assert not (tmp_path / "media").exists()  # nothing kept of a failed note


def test_status_shows_the_speech_and_its_last_failure() -> None:
    assert speech_lines({"enabled": False}) == []
    assert speech_lines(
        {
            "enabled": True,
            "spoken": 4,
            "failed": 1,
            "last_failure": {"at": "2026-01-02T03:04:05+00:00", "reason": "answered 503"},
        }
    ) == ["speech: 4 spoken, 1 failed; last failure at 2026-01-02T03:04:05+00:00: answered 503"]


async def test_each_agent_gets_its_own_mode_and_none_without_an_endpoint(
    tmp_path: Path, speech: SpeechServer
) -> None:
    def settings_with(speech_section: dict[str, object]) -> Settings:
        return Settings(
            storage={"data_dir": str(tmp_path / "data")},  # type: ignore[arg-type]
            agents={"list": [{"name": "main"}, {"name": "radio", "voice_reply": "always"}]},  # type: ignore[arg-type]
            speech=speech_section,  # type: ignore[arg-type]
        )

    settings = settings_with({"base_url": speech.base_url})
    shared = build_shared(settings)
    caps = caps_of(settings, shared.usage)
    try:
        main = voice_replies(settings, "main", shared, Scripted("x"), caps)
        radio = voice_replies(settings, "radio", shared, Scripted("x"), caps)
        assert main is not None and radio is not None
        assert not main.wanted(matrix(voice=False)) and main.wanted(matrix())
        assert radio.wanted(matrix(voice=False))
        [note] = await radio.notes(matrix(voice=False), "On air.", None)
    finally:
        assert shared.speech is not None
        await shared.speech.aclose()
    [record] = await shared.usage.today_records()
    assert (record.agent, record.purpose, record.prompt_tokens) == ("radio", "speech", 7)
    assert note.kind == "voice"
    off = settings_with({})
    assert voice_replies(off, "main", build_shared(off), Scripted("x"), caps) is None


async def test_speech_counts_in_the_daily_cost_cap(tmp_path: Path, speech: SpeechServer) -> None:
    settings = Settings(
        storage={"data_dir": str(tmp_path / "data")},  # type: ignore[arg-type]
        limits={"daily_cost": 0.001},  # type: ignore[arg-type]
        speech={"base_url": speech.base_url, "reply": "always", "price_per_1m_chars": 15.0},  # type: ignore[arg-type]
    )
    shared = build_shared(settings)
    caps = caps_of(settings, shared.usage)
    voice = voice_replies(settings, "main", shared, Scripted("x"), caps)
    assert voice is not None
    answer = "A hundred characters of answer, spoken aloud at fifteen a million: " + "x" * 33
    assert len(answer) == 100
    try:
        assert len(await voice.notes(matrix(), answer, None)) == 1  # under the cap: spoken
        [state] = await caps.states(matrix())
        assert state.scope == "daily_cost" and state.used == pytest.approx(100 * 15 / 1e6)
        assert await voice.notes(matrix(), answer, None) == ()  # the speech reached it
    finally:
        assert shared.speech is not None
        await shared.speech.aclose()
    assert len(speech.heard) == 1
    assert "daily_cost" in shared.speech.health.snapshot()["last_failure"]["reason"]  # type: ignore[index]
