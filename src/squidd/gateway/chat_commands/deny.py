"""`/deny ID`: no to the approval question ID; the tool is not run. Taken like `/approve`
(see approve.py)."""

from __future__ import annotations

from squidd.core.approvals import Choice
from squidd.gateway.chat_commands.approve import reply
from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    return await reply(call, "deny", Choice.NO)


COMMAND = ChatCommand("deny", "ID: no to the approval question ID (the tool is not run)", _run)
