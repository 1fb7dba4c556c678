"""Approvals on the chat channels: the prompt sent into the conversation, and the answers
taken out of line.

`ChannelAsker` puts a question (core/approvals.py) where the turn's message came from: the
exact call, its id and how to answer (`/approve <id>`, `/always <id>`, `/deny <id>`, or a
reply "yes" / "no" — the way to answer by mail). The turn that asks is the one whose message
the router is running, handed down as `asked_from` (the turn runner's argument to
`AgentLoop.run`, on to `Approvals.gate` and the asker). The prompt is
delivered like a reply (core/prompts.py): kept in the outbox first, sent with the router's
retries, sent once across a crash, parked when refused for good (the call is then denied,
the model told why). The question's timeout counts from the prompt's delivery
(core/approvals.py), so an answer to a prompt that took its retries still counts.

`ApprovalAnswers` is the first stage of the pipeline (gateway/pipeline.py): an answer is
taken there, before the session's queue and before any stage that holds a message (bursts),
because the turn waiting for it holds that session's place — behind it, the answer would
only arrive after the timeout. The decision is written (fsync'd, once) before the message
is acknowledged; a second answer, or one from someone who is not an approver, changes
nothing and is acknowledged all the same. `/approvals` while a question waits in its
conversation is answered here too. Anything else goes on to the queue untouched.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping

import structlog

from squidd.core.approvals import UNDELIVERED, Answer, Approvals, Choice, Question
from squidd.core.command_words import APPROVAL, parse
from squidd.core.models import Inbound, InboundKind, Outbound, PendingReply, SessionId
from squidd.core.ports import Channel, HandOn, Later
from squidd.core.prompts import PromptDelivery
from squidd.core.settlement import acknowledge
from squidd.errors import SquiddError
from squidd.gateway.chat_commands import approvals as approvals_command

log = structlog.get_logger()

__all__ = ["ApprovalAnswers", "ChannelAsker"]

_COMMAND = re.compile(rf"/({'|'.join(sorted(APPROVAL))})\s+([0-9a-f]{{8}})\b", re.IGNORECASE)
_WORDS = {
    "yes": Choice.ONCE,
    "y": Choice.ONCE,
    "approve": Choice.ONCE,
    "✅": Choice.ONCE,
    "always": Choice.ALWAYS,
    "♾️": Choice.ALWAYS,
    "♾": Choice.ALWAYS,
    "no": Choice.NO,
    "n": Choice.NO,
    "deny": Choice.NO,
    "❌": Choice.NO,
}
# Put on the prompt where the channel has reactions (Matrix), to be picked.
OFFERED = ("✅", "♾️", "❌")
_BY_COMMAND = {"approve": Choice.ONCE, "always": Choice.ALWAYS, "deny": Choice.NO}


def prompt_text(question: Question, timeout_s: float) -> str:
    return (
        f"Approval needed ({question.id}): {question.prompt()}\n"
        f"Answer /approve {question.id} (once), /always {question.id} (from now on in this "
        f"conversation) or /deny {question.id}; by mail, reply yes or no. "
        f"No answer within {timeout_s:g} s means no."
    )


class ChannelAsker:
    """Sends the question into the conversation the turn answers, as the router delivers a
    reply (core/prompts.py); the answer comes later."""

    def __init__(self, prompts: PromptDelivery, timeout_s: float) -> None:
        self._prompts = prompts
        self._timeout_s = timeout_s

    async def ask(self, question: Question, asked_from: Inbound | None) -> Answer | None:
        inbound = asked_from
        destination = None if inbound is None else inbound.destination
        if inbound is None or destination is None:
            return Answer(Choice.NO, "nobody")
        prompt = PendingReply(
            destination.channel,
            destination.target,
            prompt_text(question, self._timeout_s),
            inbound.session_id,
            subject=inbound.subject,
        )
        refused = await self._prompts.send(inbound, question.id, prompt, OFFERED)
        if refused is not None:
            log.warning("approval_prompt_undelivered", question=question.id, reason=refused)
            return Answer(Choice.NO, UNDELIVERED)
        return None


def _first_word(text: str) -> str:
    """The answer's first word, past the subject line a mail's text starts with."""
    for line in text.strip().splitlines():
        if line.startswith("Subject: ") or line == "(no subject)":
            continue
        words = line.strip().lower().rstrip(".!").split()
        if words:
            return words[0].rstrip(".,!")
    return ""


class ApprovalAnswers:
    """The pipeline's first stage (see the module). `session_of` names a conversation's
    current session (after `/new`, `<conversation>#<n>`): the one its questions are asked in."""

    def __init__(
        self,
        approvals: Approvals,
        channels: Mapping[str, Channel],
        session_of: Callable[[str], Awaitable[SessionId]],
    ) -> None:
        self._approvals = approvals
        self._channels = channels
        self._session_of = session_of

    async def _asked_here(self, inbound: Inbound) -> list[Question]:
        """The questions waiting in `inbound`'s conversation, in its current session."""
        sessions = {inbound.session_id, await self._session_of(inbound.session_id)}
        return [q for q in await self._approvals.waiting() if q.session in sessions]

    async def _listing(self, inbound: Inbound) -> bool:
        """`/approvals` while a question waits in its conversation: answered here, since
        behind the waiting turn it would only be answered once the question is decided."""
        parsed = parse(inbound.text)
        if parsed is None or parsed[0] != approvals_command.COMMAND.name:
            return False
        waiting = await self._asked_here(inbound)
        channel = self._channels.get(inbound.channel)
        destination = inbound.destination
        if not waiting or channel is None or destination is None:
            return False
        text = await approvals_command.answer(self._approvals, waiting[0].session, parsed[1])
        outbound = Outbound(
            channel=destination.channel,
            target=destination.target,
            text=text,
            session_id=inbound.session_id,
            in_reply_to=inbound,
            subject=inbound.subject,
        )
        try:
            await channel.send(outbound)
        except SquiddError as exc:
            log.warning("approvals_listing_undelivered", reason=str(exc))
        await acknowledge(inbound)
        return True

    async def _target(self, inbound: Inbound) -> tuple[str, Choice] | None:
        found = _COMMAND.match(inbound.text.strip())
        if found is not None:
            return found.group(2).lower(), _BY_COMMAND[found.group(1).lower()]
        choice = _WORDS.get(_first_word(inbound.text))
        if choice is None:
            return None
        waiting = [q for q in await self._asked_here(inbound) if q.channel == inbound.channel]
        if len(waiting) != 1:
            return None  # nothing asked here, or several: only `/approve <id>` says which
        return waiting[0].id, choice

    async def take(self, message: Inbound, then: HandOn, later: Later) -> None:
        """The pipeline's stage: an answer is kept here, anything else handed on."""
        if not await self.taken(message):
            await then(message)

    async def taken(self, inbound: Inbound) -> bool:
        """True when `inbound` was an answer (taken and acknowledged here); a reaction is
        always taken (answering nothing, it is dropped: a reaction is never a turn)."""
        if inbound.kind not in (InboundKind.MESSAGE, InboundKind.REACTION):
            return False
        if inbound.kind is InboundKind.MESSAGE and await self._listing(inbound):
            return True
        target = await self._target(inbound)
        if target is None:
            if inbound.kind is InboundKind.REACTION:
                await acknowledge(inbound)
            return inbound.kind is InboundKind.REACTION
        question_id, choice = target
        said = await self._approvals.answer(question_id, inbound.sender, choice)
        log.info("approval_answer_taken", question=question_id, outcome=said or "ignored")
        await acknowledge(inbound)
        return True
