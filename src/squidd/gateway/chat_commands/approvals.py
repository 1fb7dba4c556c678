"""`/approvals`: the approval questions waiting in this conversation and the `always` rules
granted in it; `/approvals revoke N` takes rule N back (core/approvals.py)."""

from __future__ import annotations

from squidd.core.approvals import Approvals
from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    approvals = call.host.approvals()
    if approvals is None:
        return "Approvals are not in use here."
    return await answer(approvals, call.inbound.session_id, call.argument)


async def answer(approvals: Approvals, session: str, argument: str) -> str:
    """The command's answer for `session` (also given out of line while a question waits:
    gateway/approval_answers.py)."""
    words = argument.split()
    if words and words[0].lower() == "revoke":
        if len(words) != 2 or not words[1].isdigit():
            return "Say /approvals revoke N, N from the list /approvals shows."
        removed = await approvals.revoke(session, int(words[1]))
        return "No such rule." if removed is None else f"Revoked: {removed.describe()}"
    waiting = [q for q in await approvals.waiting() if q.session == session]
    rules = await approvals.rules(session)
    lines = [f"Waiting for an answer: {len(waiting)}"]
    lines += [f"  {q.id}: {q.prompt()} (until {q.deadline:%H:%M:%S} UTC)" for q in waiting]
    lines.append(f"Always allowed here: {len(rules)}")
    lines += [f"  {n}. {rule.describe()}" for n, rule in enumerate(rules, start=1)]
    if rules:
        lines.append("(/approvals revoke N takes one back)")
    return "\n".join(lines)


COMMAND = ChatCommand(
    "approvals", "approval questions waiting here, and the always rules (revoke N)", _run
)
