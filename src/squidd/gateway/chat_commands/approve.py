"""`/approve ID`: yes, once, to the approval question ID (core/approvals.py).

An answer is taken before the session's queue (gateway/approval_answers.py), because the turn
waiting for it holds the conversation's place; this entry is what `/help` lists, and what
answers an `/approve` that comes this way: one without an id, or naming no question waiting
in this conversation (answered plainly, never sent to the model). `/always` and `/deny`
answer through `reply` too.
"""

from __future__ import annotations

import re

from squidd.core.approvals import Choice
from squidd.gateway.chat_commands.base import ChatCommand, CommandCall

_ID = re.compile(r"[0-9a-fA-F]{8}")


async def reply(call: CommandCall, name: str, choice: Choice) -> str:
    """The answer to `/<name> ID` come the ordinary way, taken as `choice` only if question
    ID waits in this conversation."""
    approvals = call.host.approvals()
    if approvals is None:
        return "Approvals are not in use here: no tool waits for an answer."
    words = call.argument.split()
    if len(words) != 1 or _ID.fullmatch(words[0]) is None:
        return (
            f"Say /{name} ID, with the 8-character id the approval question gave "
            "(/approvals lists the questions waiting here)."
        )
    question_id = words[0].lower()
    waiting = [
        q
        for q in await approvals.waiting()
        if q.id == question_id and q.session == call.conversation
    ]
    if not waiting:
        return f"No approval question with id {question_id} is waiting here."
    said = await approvals.answer(question_id, call.inbound.sender, choice)
    return said or f"Only an approver may answer approval question {question_id}."


async def _run(call: CommandCall) -> str:
    return await reply(call, "approve", Choice.ONCE)


COMMAND = ChatCommand("approve", "ID: yes, once, to the approval question ID", _run)
