"""`/stop`: cancel this conversation's running turn.

The cancelling happens as the message arrives (gateway/conversations.py `StopEarly`, a stage
of the pipeline): it cannot wait in line behind the turn it stops. This module answers the
message afterwards, and withdraws the approval questions the stopped turn left waiting here
(denied by the person who stopped it): nothing waits for their answer any more, so neither
`/approvals` nor the dashboard offers them, and a late ✅ runs nothing.
"""

from __future__ import annotations

from squidd.core.approvals import Choice
from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _withdraw(call: CommandCall) -> list[str]:
    approvals = call.host.approvals()
    if approvals is None:
        return []
    sessions = {call.inbound.session_id, await call.host.conversations.session(call.conversation)}
    withdrawn = []
    for question in await approvals.waiting():
        if question.session in sessions:
            await approvals.answer(question.id, call.inbound.sender, Choice.NO, check_sender=False)
            withdrawn.append(question.id)
    return withdrawn


async def _run(call: CommandCall) -> str:
    if not call.host.conversations.took_stop(call.conversation):
        return "Nothing was running."
    withdrawn = await _withdraw(call)
    if not withdrawn:
        return "Stopped the turn that was running."
    return (
        "Stopped the turn that was running; its approval question "
        f"{', '.join(withdrawn)} no longer waits."
    )


COMMAND = ChatCommand("stop", "cancel the turn that is running in this conversation", _run)
