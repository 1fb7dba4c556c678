"""Configuration of voice replies (`[speech]`): answers spoken as well as written.

`[speech]` names an OpenAI-compatible `/v1/audio/speech` endpoint (OpenAI, or a local
Piper or Kokoro server speaking the same API), the model and voice, and when to speak:
`reply = "when-voice"` (the person sent a voice message), `"always"` or `"never"`; an
agent's `voice_reply` (`[[agents.list]]`) and a Matrix room's entry in `rooms` override it,
the room's winning. The format is Ogg/Opus only: it is what Matrix clients show as a voice
note and what mail clients play. The endpoint takes at most 4096 characters of input per
request, so a long answer is spoken in parts of at most `part_chars` (at most `max_parts`
of them) or summarised by the agent's model first (`long = "summary"`). Without a
base_url nothing is spoken.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from squidd.config._base import Endpoint

__all__ = ["SPEECH_INPUT_LIMIT", "ReplyMode", "SpeechSettings"]

ReplyMode = Literal["when-voice", "always", "never"]
SPEECH_INPUT_LIMIT = 4096
"""The most characters of input `/v1/audio/speech` takes in one request."""

_ROOM_RE = re.compile(r"^![^\s]+$")


class SpeechSettings(Endpoint):
    """An OpenAI-compatible text-to-speech endpoint for voice replies."""

    credential_prefix: ClassVar[str] = "speech"

    base_url: str = ""
    """Empty: answers are never spoken."""
    model: str = "tts-1"
    voice: str = "alloy"
    format: Literal["opus"] = "opus"
    """Ogg/Opus, the one format Matrix shows as a voice note."""
    timeout_s: float = Field(default=60.0, gt=0)
    reply: ReplyMode = "when-voice"
    """When an answer is also spoken: to a voice message, always, or never."""
    rooms: dict[str, ReplyMode] = Field(default_factory=dict)
    """Matrix room id -> `reply` for that room (wins over the agent's and this section's)."""
    long: Literal["parts", "summary"] = "parts"
    """An answer over `part_chars`: spoken in parts, or summarised by the model first."""
    part_chars: int = Field(default=SPEECH_INPUT_LIMIT, ge=100, le=SPEECH_INPUT_LIMIT)
    max_parts: int = Field(default=3, ge=1, le=20)
    """Parts spoken at most; the rest of a longer answer is only written."""
    price_per_1m_chars: float | None = Field(default=None, ge=0)
    """Money per million characters spoken, for `squidd usage` and the daily cost caps."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be empty or an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("rooms")
    @classmethod
    def _room_ids(cls, value: dict[str, ReplyMode]) -> dict[str, ReplyMode]:
        for room in value:
            if not _ROOM_RE.match(room):
                raise ValueError(f"{room!r} is not a Matrix room id like '!abc:example.org'")
        return value

    @property
    def enabled(self) -> bool:
        return bool(self.base_url)

    def mode_for(self, *, agent: ReplyMode | None, room: str | None) -> ReplyMode:
        """When to speak in `room` (None: not a Matrix room) for an agent whose own setting
        is `agent` (None: it sets none): the room's, else the agent's, else this section's."""
        if room is not None and room in self.rooms:
            return self.rooms[room]
        return agent if agent is not None else self.reply
