"""Who is answered, where, and whose invites are accepted. Pure logic, no I/O.
The allowlist of senders is the common part every channel shares (`core.allowlist`).

The rules (docs/matrix.md):
* a sender must be allowlisted (full MXID, or a whole server);
* direct chats (at most two members) with an allowed sender are always answered;
* group rooms must be listed in `allowed_rooms` (an empty list allows any room the bot
  is in) and there the bot answers only when mentioned (intentional mention in
  `m.mentions`, its MXID, or its display name), unless the room is in `open_rooms`;
* the bot never answers itself, nor the daemon's other bot accounts (an agent's own account
  in the same room would otherwise answer its answers, and it this one's, forever), nor
  notices (the convention for bots' messages);
* invites are accepted only from allowed users.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from squidd.channels.matrix.ids import RoomId
from squidd.core.allowlist import Allowlist
from squidd.core.models import ChannelName

CHANNEL = ChannelName("matrix")  # `[matrix]`'s account


def server_of(mxid: str) -> str:
    """`@user:example.org` -> `example.org` (lowercase); '' for something that is no MXID."""
    _, sep, server = mxid.partition(":")
    return server.lower() if sep else ""


@dataclass(frozen=True, slots=True)
class Decision:
    answer: bool
    reason: str


@dataclass(slots=True)
class Policy:
    """The allowlists; room aliases are resolved to ids by the channel at start-up."""

    bot_user_id: str
    senders: Allowlist  # users by MXID, or whole servers; never the bot itself
    allowed_rooms: frozenset[str]
    open_rooms: frozenset[str]
    session_scope: str = "auto"
    """`room`: a room is one session; `thread`: each thread is its own; `auto`: threads in
    group rooms, the room in direct chats. `room_scopes` overrides it by room id."""
    room_scopes: Mapping[str, str] = field(default_factory=dict)
    channel: ChannelName = CHANNEL
    """The channel's name: `matrix`, or `matrix-<agent>` for an agent's own account."""
    siblings: frozenset[str] = frozenset()
    """The daemon's other bot accounts (MXIDs): never answered, whatever the allowlist."""

    @classmethod
    def build(
        cls,
        bot_user_id: str,
        *,
        allowed_users: Iterable[str],
        allowed_servers: Iterable[str],
        allowed_rooms: Iterable[str],
        open_rooms: Iterable[str],
        session_scope: str = "auto",
        room_scopes: Mapping[str, str] | None = None,
        channel: str = "matrix",
        siblings: Iterable[str] = (),
    ) -> Policy:
        return cls(
            bot_user_id=bot_user_id,
            senders=Allowlist.of(
                allowed_users, allowed_servers, domain_of=server_of, own=bot_user_id
            ),
            allowed_rooms=frozenset(allowed_rooms),
            open_rooms=frozenset(open_rooms),
            session_scope=session_scope,
            room_scopes=dict(room_scopes or {}),
            channel=ChannelName(channel),
            siblings=frozenset(siblings) - {bot_user_id},
        )

    def session_of(self, room_id: str, *, direct: bool, thread_root: str | None) -> str:
        """The session a message belongs to: its room, or its thread (`<room>/thread/<root>`)."""
        scope = self.room_scopes.get(room_id, self.session_scope)
        if scope == "auto":
            scope = "room" if direct else "thread"
        if scope == "thread" and thread_root:
            return f"{room_id}/thread/{thread_root}"
        return room_id

    def user_allowed(self, mxid: str) -> bool:
        return mxid not in self.siblings and self.senders.allows(mxid)

    def invite_accepted(self, inviter: str) -> bool:
        return self.user_allowed(inviter)

    def room_allowed(self, room_id: RoomId, *, direct: bool) -> bool:
        if direct or room_id in self.open_rooms:
            return True
        return not self.allowed_rooms or room_id in self.allowed_rooms

    def decide(
        self,
        *,
        room_id: RoomId,
        sender: str,
        msgtype: str,
        content: Mapping[str, Any],
        member_count: int,
        display_names: Iterable[str],
    ) -> Decision:
        """Whether a text message is answered, with the reason for the log."""
        if sender == self.bot_user_id:
            return Decision(False, "own message")
        if sender in self.siblings:
            return Decision(False, "another bot account of this daemon")
        if msgtype == "m.notice":
            return Decision(False, "notice (bot message)")
        if not self.user_allowed(sender):
            return Decision(False, "sender not allowlisted")
        direct = member_count <= 2
        if not self.room_allowed(room_id, direct=direct):
            return Decision(False, "room not allowlisted")
        if direct:
            return Decision(True, "direct chat")
        if room_id in self.open_rooms:
            return Decision(True, "open room")
        if mentions_bot(content, self.bot_user_id, display_names):
            return Decision(True, "mentioned")
        return Decision(False, "group room without mention")


def mentions_bot(
    content: Mapping[str, Any], bot_user_id: str, display_names: Iterable[str]
) -> bool:
    """Intentional mention (`m.mentions.user_ids`), or the MXID / a display name in the text."""
    mentions = content.get("m.mentions")
    if isinstance(mentions, Mapping):
        ids = mentions.get("user_ids")
        if isinstance(ids, list) and bot_user_id in ids:
            return True
    texts = [content.get("body"), content.get("formatted_body")]
    haystack = "\n".join(t for t in texts if isinstance(t, str))
    if not haystack:
        return False
    if bot_user_id in haystack:
        return True
    for name in display_names:
        name = name.strip()
        if len(name) < 2:
            continue
        # Whole word, case-insensitive: "squidd," and "@squidd" count, "squiddy" does not.
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", haystack, re.IGNORECASE):
            return True
    return False


def command_text(text: str, bot_user_id: str, display_names: Iterable[str]) -> str:
    """`/cmd ...` of a message addressed to the bot (`@bot /new`, `Squidd: /status`, or
    `/new` itself); "" when it does not start with a slash word after the mention. Which
    words are commands is the gateway's to decide."""
    stripped = text.strip()
    if stripped.startswith("/"):
        return stripped
    names = [bot_user_id, *(f"@{n.strip()}" for n in display_names), *display_names]
    for name in sorted((n.strip() for n in names if len(n.strip()) >= 2), key=len, reverse=True):
        if stripped[: len(name)].casefold() == name.casefold():
            rest = stripped[len(name) :].lstrip(":,; \t")
            return rest if rest.startswith("/") else ""
    return ""
