"""`/always ID`: yes to the approval question ID, and from now on in this conversation (an
`always` rule, core/approvals.py; `/approvals revoke N` takes it back). Taken like `/approve`
(see approve.py)."""

from __future__ import annotations

from squidd.core.approvals import Choice
from squidd.gateway.chat_commands.approve import reply
from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    return await reply(call, "always", Choice.ALWAYS)


COMMAND = ChatCommand(
    "always", "ID: yes to the approval question ID, and from now on in this conversation", _run
)
