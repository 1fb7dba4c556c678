"""`/stop`: cancel this conversation's running turn.

The cancelling happens as the message arrives (gateway/conversations.py `StopEarly`, a stage
of the pipeline): it cannot wait in line behind the turn it stops. This module answers the
message afterwards.
"""

from __future__ import annotations

from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    if call.host.conversations.took_stop(call.conversation):
        return "Stopped the turn that was running."
    return "Nothing was running."


COMMAND = ChatCommand("stop", "cancel the turn that is running in this conversation", _run)
