"""`/new`: a fresh session for this conversation; the old history stays on disk, unread."""

from __future__ import annotations

from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    await call.host.conversations.file.new(call.conversation)
    return (
        "Started a new conversation: I will not see the earlier messages of this one "
        "(they stay in my history on disk). What I keep in my long-term memory stays."
    )


COMMAND = ChatCommand("new", "start a fresh conversation (the old one is kept, not read)", _run)
