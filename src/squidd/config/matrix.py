"""The `[matrix]` section: homeserver, bot credentials, who may talk to the bot, and tuning.

Defaults are the safe choice: end-to-end encryption on, nobody answered until listed, group
rooms answered only when the bot is mentioned, and room keys shared only with the devices
of allowed users that their owner's pinned identity cross-signed (see docs/matrix.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from squidd.config._base import Section

# Loose on purpose: historical user ids allow more than today's grammar, and a stricter
# check here would lock people out. The homeserver is the authority.
_MXID_RE = re.compile(r"^@[^:\s]+:[^\s]+$")
# Room ids of room version 12 have no server part (`!hash`); aliases always do.
_ROOM_RE = re.compile(r"^(![^\s]+|#[^:\s]+:[^\s]+)$")
_SERVER_RE = re.compile(r"^[A-Za-z0-9.\-\[\]:]+$")


def check_homeserver(value: str) -> str:
    """A homeserver's base URL (http or https), without a trailing slash; '' stays ''."""
    if value and not re.match(r"^https?://[^/\s]+", value):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


def check_mxid(value: str) -> str:
    if not _MXID_RE.match(value):
        raise ValueError("must be a full Matrix user id like '@bot:example.org'")
    return value


class MatrixSettings(Section):
    """One bot account on one homeserver."""

    secret_fields: ClassVar[tuple[str, ...]] = ("access_token", "password")
    credential_prefix: ClassVar[str] = "matrix"

    enabled: bool = False
    homeserver: str = ""
    """Base URL of the client-server API, e.g. `https://matrix.example.org`."""
    user_id: str = ""
    """The bot's full MXID. Required with a password; with a token the server tells it."""
    access_token: SecretStr | None = None
    access_token_file: Path | None = None
    password: SecretStr | None = None
    password_file: Path | None = None
    """With a password squidd logs in once and keeps the device id and token in the data dir."""
    device_name: str = "squidd"

    allowed_users: list[str] = Field(default_factory=list)
    """Full MXIDs that are answered and whose invites are accepted."""
    allowed_servers: list[str] = Field(default_factory=list)
    """Whole homeservers whose users are all allowed (e.g. your own server)."""
    allowed_rooms: list[str] = Field(default_factory=list)
    """Group rooms (ids `!…` or aliases `#…`) answered in. Empty: any room the bot was
    invited to by an allowed user. Direct chats (two members) are always allowed."""
    open_rooms: list[str] = Field(default_factory=list)
    """Group rooms where every message of an allowed user is answered, mention or not."""

    debounce_ms: int = Field(default=1500, ge=0, le=60_000)
    """Messages of one conversation arriving within this quiet window are answered as one
    turn (and those arriving while its turn runs, together in the next); 0: each message
    is answered on its own."""
    session_scope: Literal["auto", "room", "thread"] = "auto"
    """`thread`: each thread of a room is its own conversation (own history, summary,
    `/new`); `room`: the room is one; `auto`: threads in group rooms, the room in DMs."""
    room_session_scope: dict[str, Literal["room", "thread"]] = Field(default_factory=dict)
    """`session_scope` for single rooms, by room id."""

    e2ee: bool = True
    device_trust: Literal["cross-signed", "allowlisted", "all"] = "cross-signed"
    """Whose devices get the room keys of the bot's encrypted replies, and whose encrypted
    messages are acted on: `cross-signed` trusts an allowed user's devices that their
    identity (master key, pinned on first sight) signed; `allowlisted` trusts the devices of
    allowed users on first sight (for people on legacy clients without cross-signing); `all`
    shares with every device in the room."""
    decrypt_wait_s: float = Field(default=60.0, ge=0)
    """How long an undecryptable message waits for its room key before it is given up."""

    msgtype: Literal["m.text", "m.notice"] = "m.text"
    """`m.text` notifies people like a human's message; `m.notice` marks the bot's replies
    as automated (clients usually do not notify for them)."""
    max_message_bytes: int = Field(default=16_000, ge=1_000, le=30_000)
    """Longer replies are split into several events (the homeserver caps events at 64 KiB,
    and HTML plus encryption roughly triple the size)."""
    typing_notice: bool = True
    status_reactions: bool = True
    """Mark a person's message: `reaction_taken` when taken, replaced by `reaction_done`
    when answered or `reaction_failed` when it ended without an answer."""
    reaction_taken: str = Field(default="👀", min_length=1, max_length=16)
    reaction_done: str = Field(default="✅", min_length=1, max_length=16)
    reaction_failed: str = Field(default="❌", min_length=1, max_length=16)
    read_receipts: bool = True
    """Send a read receipt for a message when it is taken."""
    streaming: Literal["off", "edits"] | None = None
    """`edits`: the answer appears as it is written (the first chunk as the reply, the rest
    as edits of it, paced for the homeserver's default rate limit); `off`: one message at
    the end. Unset: `edits` in direct chats, `off` in group rooms."""
    room_streaming: dict[str, Literal["off", "edits"]] = Field(default_factory=dict)
    """Per-room `streaming` by room id, over the global choice."""
    stream_first_chars: int = Field(default=200, ge=1, le=4_000)
    """The first chunk goes out once the answer has this many characters; a shorter answer
    is sent once, at the end (two events for a short reply would spend the rate limit)."""
    stream_quick_edits: int = Field(default=3, ge=0, le=8)
    """Edits at the start that may follow each other after `stream_quick_interval_s`."""
    stream_quick_interval_s: float = Field(default=1.0, ge=0.2)
    stream_interval_s: float = Field(default=5.0, ge=1.0)
    """Least time between later edits (stock Synapse allows 0.2 events/s after a burst)."""
    stream_max_edits: int = Field(default=40, ge=0, le=200)
    """Most edits while an answer streams; then only the final one."""
    stream_max_chars: int = Field(default=4_000, ge=100, le=8_000)
    """Longer partial text waits for the final edit."""
    rate_per_second: float = Field(default=0.2, ge=0, le=1_000)
    """Events per second the homeserver lets the bot send after its burst (messages, edits,
    reactions, redactions: Synapse's `rc_message.per_second`, 0.2 by default); 0: no limit
    kept (a homeserver that does not limit the bot)."""
    rate_burst: int = Field(default=10, ge=1, le=10_000)
    """Events the bot may send at once before `rate_per_second` applies (Synapse's
    `rc_message.burst_count`)."""
    max_text_chars: int = Field(default=20_000, gt=0)
    """Most characters of one message the model sees; the rest is cut and the model is told
    so (a huge message would otherwise ride along in every request of the room)."""

    sync_timeout_s: float = Field(default=30.0, gt=0, le=300)
    timeline_limit: int = Field(default=100, ge=1, le=1000)
    """Events per room per sync; a longer gap is fetched with `/messages`."""
    reconnect_initial_delay_s: float = Field(default=1.0, gt=0)
    reconnect_max_delay_s: float = Field(default=60.0, gt=0)
    request_timeout_s: float = Field(default=60.0, gt=0)

    @field_validator("homeserver")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_homeserver(value)

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str) -> str:
        return check_mxid(value) if value else value

    @field_validator("allowed_users")
    @classmethod
    def _users(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _MXID_RE.match(value):
                raise ValueError(f"{value!r} is not a full Matrix user id like '@me:example.org'")
        return values

    @field_validator("allowed_servers")
    @classmethod
    def _servers(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _SERVER_RE.match(value):
                raise ValueError(f"{value!r} is not a server name like 'example.org'")
        return [v.lower() for v in values]

    @field_validator("allowed_rooms", "open_rooms")
    @classmethod
    def _rooms(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _ROOM_RE.match(value):
                raise ValueError(
                    f"{value!r} is not a room id ('!abc…') or alias ('#room:example.org')"
                )
        return values

    @model_validator(mode="after")
    def _complete(self) -> MatrixSettings:
        if self.reconnect_max_delay_s < self.reconnect_initial_delay_s:
            raise ValueError("reconnect_max_delay_s must be >= reconnect_initial_delay_s")
        if not self.enabled:
            return self
        if not self.homeserver:
            raise ValueError("homeserver is required when matrix is enabled")
        if self.access_token is None and self.password is None:
            raise ValueError("set access_token (or access_token_file) or password")
        if self.access_token is None and not self.user_id:
            raise ValueError("user_id is required to log in with a password")
        return self
