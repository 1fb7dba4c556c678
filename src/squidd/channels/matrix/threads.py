"""Threads as conversations: the thread root's text for the model, the first time.

With `session_scope = "thread"` (the default in group rooms) a thread's messages form their
own session (`Policy.session_of`), which starts without the message the thread hangs on.
`ThreadRoots` is the channel's stage in the daemon's pipeline (`MatrixChannel.stages`,
after the approval answers and `/stop`, before bursts): the first message of such a thread
that it hands on in this run carries the root's text before its own, fetched from the
homeserver (decrypted in an encrypted room) through the channel's client of the moment. A
root it cannot read (or no client, between connections) is left out (logged at debug
level): the message still goes on. A chat command is handed on as it is, still a command.
After a restart the root is given once more, which costs a few tokens and loses nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import structlog
from nio import AsyncClient, MegolmEvent, RoomGetEventResponse

from squidd.channels.matrix.client import call
from squidd.core.command_words import parse
from squidd.core.models import Inbound
from squidd.core.ports import HandOn, Later
from squidd.errors import SquiddError
from squidd.text import clean_text

__all__ = ["ROOT_CHARS", "ThreadRoots", "with_root"]

log = structlog.get_logger()

ROOT_CHARS = 4000
"""Most characters of a thread root the model is given."""


def with_root(inbound: Inbound, root_text: str, *, by_bot: bool) -> Inbound:
    """`inbound` with the thread root's text before its own."""
    who = "you" if by_bot else "someone"
    root = root_text[:ROOT_CHARS]
    text = f"[This message is in a thread on a message {who} wrote:\n{root}\n]\n\n{inbound.text}"
    return dataclasses.replace(inbound, text=text)


async def root_text(client: AsyncClient, room_id: str, event_id: str) -> tuple[str, str] | None:
    """(sender, body) of a room event, None when it cannot be read."""
    try:
        response = await call("thread root", client.room_get_event(room_id, event_id))
    except SquiddError as exc:
        log.debug("matrix_thread_root_unread", room=room_id, reason=str(exc))
        return None
    if not isinstance(response, RoomGetEventResponse):
        log.debug("matrix_thread_root_unread", room=room_id, reason=type(response).__name__)
        return None
    event = response.event
    if isinstance(event, MegolmEvent):
        try:
            event = client.decrypt_event(event)
        except Exception as exc:  # noqa: BLE001 - nio raises several kinds; a root is optional
            log.debug("matrix_thread_root_unread", room=room_id, reason=type(exc).__name__)
            return None
    content = event.source.get("content", {}) if isinstance(event.source, dict) else {}
    body = content.get("body") if isinstance(content, dict) else None
    if not isinstance(body, str) or not body.strip():
        return None
    return str(event.sender), clean_text(body)


class ThreadRoots:
    """The stage giving a thread session's first message its root's text; `client` is the
    channel's logged-in client while it is connected, else None."""

    def __init__(self, client: Callable[[], AsyncClient | None]) -> None:
        self._client = client
        self._seen: set[str] = set()

    async def take(self, message: Inbound, then: HandOn, later: Later) -> None:
        root, session = message.thread_root, message.session_id
        client = self._client()
        if (
            root
            and client is not None
            and session not in self._seen
            and session.endswith(root)
            and parse(message.command or message.text) is None
        ):
            self._seen.add(session)
            room = str(message.reply_to.target if message.reply_to else "")
            found = await root_text(client, room, root)
            if found is not None:
                message = with_root(message, found[1], by_bot=found[0] == client.user_id)
        await then(message)
