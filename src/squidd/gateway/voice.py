"""Voice replies: a turn's written answer also spoken, as voice notes that go with it.

After a turn answered, `VoiceReplies.notes` decides whether the answer is spoken: the
conversation's mode (`[speech] rooms` for its Matrix room, else the agent's `voice_reply`,
else `[speech] reply`) — `when-voice` when the message carried a voice note, `always`,
`never` — for a person's message whose answer goes to a channel that carries files (not the
API). The text is spoken in parts of at most `part_chars` (at most `max_parts`), or
summarised by the agent's model first (`long = "summary"`); each part becomes an Ogg/Opus
file in the media store, checked and measured (`media/voice.py`), and a `FileRef` of kind
`voice` on the reply, so the router's outbox keeps it with the text and the channel sends it
after the text (Matrix: a voice note; email: an attachment).

Speaking never costs the written answer: a failure (endpoint down, timed out, an error
status, bytes that are not Ogg/Opus, a daily cap reached) is logged once as a warning (no
secret in it), counted in `SpeechHealth` (shown by `squidd status`), and the reply goes
without a voice note. Each spoken part is a usage record (`purpose = "speech"`, provider
`speech`, the characters as its prompt count, priced by `price_per_1m_chars`), so the
speech counts in `squidd usage` and in the daily caps of the daemon, the session and the
person; a scope already at its cap gets no voice note.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import structlog

from squidd.config import Settings
from squidd.config.speech import ReplyMode, SpeechSettings
from squidd.core.models import (
    Inbound,
    InboundKind,
    Message,
    SessionId,
    StreamRestart,
    TextDelta,
    Usage,
)
from squidd.core.ports import LLMPort
from squidd.core.reply_files import FileRef
from squidd.core.usage import AgentUsage, UsageSink, record_usage
from squidd.errors import SpeechError
from squidd.gateway.caps import DailyCaps
from squidd.gateway.runtime import Shared
from squidd.llm.speech import SpeechClient, SpeechHealth
from squidd.media.voice import VoiceAudio, read_ogg_opus, spoken_parts, spoken_text
from squidd.store.media import MediaStore

__all__ = ["SPEECH_PROVIDER", "VoiceReplies", "summarizer", "voice_replies"]

log = structlog.get_logger()

SPEECH_PROVIDER = "speech"
"""The provider name speech's usage records carry (prices: `speech/<model>`)."""
NO_VOICE_CHANNELS = frozenset({"api"})
"""Channels whose answer cannot carry a file (the API answers one HTTP request)."""

_SUMMARY_PROMPT = (
    "Rewrite the answer below so it can be read aloud in at most {chars} characters: "
    "plain sentences, no lists, no markdown, no links; keep what matters. Reply with the "
    "rewritten text only.\n\n{answer}"
)

CapsReached = Callable[[Inbound], Awaitable[str | None]]
"""The scope of `inbound` at a daily cap now: its name, else None."""
Summarize = Callable[[str, int, SessionId], Awaitable[str | None]]
"""`text` rewritten to at most `chars` characters for speaking; None when it cannot be."""


class VoiceReplies:
    """One agent's voice notes for its answers (`notes`)."""

    def __init__(
        self,
        settings: SpeechSettings,
        client: SpeechClient,
        media: MediaStore,
        *,
        usage: UsageSink,
        agent_mode: ReplyMode | None = None,
        caps_reached: CapsReached | None = None,
        summarize: Summarize | None = None,
    ) -> None:
        self._settings = settings
        self._client = client
        self._media = media
        self._usage = usage
        self._health: SpeechHealth = client.health
        self._agent_mode = agent_mode
        self._caps_reached = caps_reached
        self._summarize = summarize

    def wanted(self, inbound: Inbound) -> bool:
        """Whether the answer to `inbound` is also spoken."""
        target = inbound.destination
        if inbound.kind is not InboundKind.MESSAGE or target is None:
            return False
        if target.channel in NO_VOICE_CHANNELS:
            return False
        room = target.target if target.target.startswith("!") else None
        mode = self._settings.mode_for(agent=self._agent_mode, room=room)
        if mode == "when-voice":
            return any(att.kind == "audio" for att in inbound.attachments)
        return mode == "always"

    async def notes(self, inbound: Inbound, answer: str, person: str | None) -> tuple[FileRef, ...]:
        """The voice notes of `answer` to `inbound` (none when it is not spoken or speaking
        failed: the failure is logged and counted, never raised)."""
        if not answer.strip() or not self.wanted(inbound):
            return ()
        try:
            cap = await self._caps_reached(inbound) if self._caps_reached else None
            if cap is not None:
                raise SpeechError(f"the daily cap {cap} is reached")  # noqa: TRY301 - one report path
            notes = await self._speak(inbound, answer, person or "")
        except Exception as exc:  # noqa: BLE001 - a voice note must never cost the written answer
            reason = str(exc) if isinstance(exc, SpeechError) else type(exc).__name__
            log.warning("speech_failed", session=inbound.session_id, reason=reason)
            self._health.failure(reason)
            return ()
        self._health.ok()
        return notes

    async def _speak(self, inbound: Inbound, answer: str, person: str) -> tuple[FileRef, ...]:
        settings = self._settings
        parts = await self._parts(answer, inbound.session_id)
        notes: list[FileRef] = []
        for number, part in enumerate(parts, start=1):
            with anyio.move_on_after(settings.timeout_s) as scope:
                audio = await self._client.speak(part)
            if scope.cancelled_caught:
                raise SpeechError(f"the speech endpoint timed out ({settings.timeout_s:g} s)")
            await self._usage.record(
                session=inbound.session_id,
                model=settings.model,
                purpose="speech",
                prompt=len(part),
                completion=0,
                cached=0,
                provider=SPEECH_PROVIDER,
                person=person,
            )
            measured = await anyio.to_thread.run_sync(read_ogg_opus, audio)
            name = "voice-reply.ogg" if len(parts) == 1 else f"voice-reply-{number}.ogg"
            notes.append(await self._kept(inbound.session_id, name, audio, measured))
        log.info("speech_spoken", session=inbound.session_id, parts=len(notes))
        return tuple(notes)

    async def _parts(self, answer: str, session: SessionId) -> list[str]:
        settings = self._settings
        limit = settings.part_chars
        if settings.long == "summary" and len(spoken_text(answer)) > limit:
            short = await self._summarize(answer, limit, session) if self._summarize else None
            if short:
                return spoken_parts(short, limit)[:1]
            log.warning("speech_summary_failed", session=session)
        parts = spoken_parts(answer, limit)
        if len(parts) > settings.max_parts:
            log.info("speech_cut", session=session, parts=len(parts), spoken=settings.max_parts)
        if not parts:
            raise SpeechError("the answer has nothing to read aloud")
        return parts[: settings.max_parts]

    async def _kept(self, session: str, name: str, audio: bytes, measured: VoiceAudio) -> FileRef:
        """The audio kept in the media store, as the reply's reference to it."""

        async def once() -> AsyncIterator[bytes]:
            yield audio

        att = await self._media.save(
            session, kind="audio", name=name, mime="audio/ogg", chunks=once(), max_bytes=len(audio)
        )
        if att.path is None:
            raise SpeechError("the voice note could not be kept")
        return FileRef(
            path=att.path,
            kind="voice",
            mime="audio/ogg",
            size=att.size,
            sha256=att.sha256,
            name=name,
            duration_ms=measured.duration_ms,
            waveform=measured.waveform,
        )


def summarizer(llm: LLMPort, usage: UsageSink) -> Summarize:
    """`Summarize` by the agent's model (its call filed as `speech_summary`)."""

    async def summarize(text: str, chars: int, session: SessionId) -> str | None:
        prompt = _SUMMARY_PROMPT.format(chars=chars, answer=text)
        chunks: list[str] = []
        try:
            async for event in llm.chat([Message(role="user", content=prompt)], []):
                if isinstance(event, TextDelta):
                    chunks.append(event.text)
                elif isinstance(event, Usage):
                    await record_usage(usage, session, "speech_summary", event)
                elif isinstance(event, StreamRestart):
                    chunks.clear()
        except Exception as exc:  # noqa: BLE001 - no summary: the answer is spoken in parts
            log.warning("speech_summary_failed", session=session, reason=type(exc).__name__)
            return None
        return "".join(chunks).strip() or None

    return summarize


def voice_replies(
    settings: Settings, agent: str, shared: Shared | None, llm: LLMPort, caps: DailyCaps
) -> VoiceReplies | None:
    """Agent `agent`'s voice replies over the daemon's speech client (None: none set up)."""
    if shared is None or shared.speech is None:
        return None
    entry = next((e for e in settings.agents.list if e.name == agent), None)
    usage: UsageSink = shared.usage if not settings.agents.list else AgentUsage(shared.usage, agent)

    async def caps_reached(inbound: Inbound) -> str | None:
        return next((s.scope for s in await caps.states(inbound) if s.reached), None)

    return VoiceReplies(
        settings.speech,
        shared.speech,
        shared.media,
        usage=usage,
        agent_mode=entry.voice_reply if entry is not None else None,
        caps_reached=caps_reached,
        summarize=summarizer(llm, usage),
    )
