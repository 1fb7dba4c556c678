"""Approvals: which tool calls ask first, the question's life, and the answer bound to the call.

A call of a tool named in the approval rules (`ApprovalRules.tools`, `[tools.approval]`) does
not run until someone says yes. `Approvals.gate` decides, before the call's start is
journaled: an `always` rule of the session that matches (this tool with these exact
arguments, or, for the shell, this command's executable) lets it run without asking;
otherwise a `Question` is kept on disk (`QuestionStore`, store/approvals.py) and put to the
person by the channel's `Asker` (the terminal asks at once; a chat channel sends a prompt and
the answer comes later through `answer`). The question is bound to the arguments' hash
(core/audit.py `arguments_hash`): a changed argument is another question.

The states: WAITING, then exactly one of APPROVED, ALWAYS, DENIED, TIMEOUT, written once
under the store's lock; a second answer finds the question decided and is ignored. The
question's id is derived from the turn and the call, so a turn resumed from its journal
after a restart meets the same question: still waiting (a prompt sent is not sent again), or
decided while it was down, or, when its deadline passed meanwhile, TIMEOUT. A chat channel's
prompt is delivered like a reply (core/prompts.py): a resumed turn asks again, and a prompt
the crash kept undelivered goes out then, one already sent does not. The timeout counts
from the prompt's delivery (in the running daemon; the deadline kept on disk is the
ask's). The turn waits in its session's place (the next message of that session waits
behind it, other sessions do not); answers therefore reach `answer` without queueing
behind it (the first stage of the channel's pipeline, gateway/pipeline.py).
"""

from __future__ import annotations

import enum
import hashlib
import json
import shlex
import uuid
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

import anyio
import structlog

from squidd.core.audit import Decision, arguments_hash, canonical_arguments
from squidd.core.models import Inbound, SessionId, ToolCall, utcnow

log = structlog.get_logger()

SHELL = "shell"


class QuestionState(enum.StrEnum):
    WAITING = "waiting"
    APPROVED = "approved"
    ALWAYS = "always"
    DENIED = "denied"
    TIMEOUT = "timeout"


class Choice(enum.StrEnum):
    """What a person answers: yes once, yes always, no."""

    ONCE = "once"
    ALWAYS = "always"
    NO = "no"


_STATE_OF = {
    Choice.ONCE: QuestionState.APPROVED,
    Choice.ALWAYS: QuestionState.ALWAYS,
    Choice.NO: QuestionState.DENIED,
}


UNDELIVERED = "undelivered"
"""Who "decided" a question whose prompt could never be delivered (core/prompts.py)."""

# Who "decided" when no person could be asked, and how the model is told.
_NO_ONE = {
    "nobody": "there is no one to ask on this channel",
    "no terminal": "there is no terminal to ask (squidd chat -m in a script)",
    UNDELIVERED: "its approval prompt could not be delivered (see squidd parked list)",
}


@dataclass(frozen=True)
class Question:
    id: str
    session: str
    channel: str
    tool: str
    arguments: str
    args_sha256: str
    asked_at: datetime
    deadline: datetime
    state: QuestionState = QuestionState.WAITING
    by: str | None = None
    asked_by: str = ""
    """Who sent the message whose turn asks (their id on the channel); "" when nobody did
    (a cron run): whose approvers may answer (`ApprovalRules.approvers_for`)."""
    agent: str = ""
    """The agent whose turn asks ("" before agents, or with one): whose rules decide who
    may answer (`Approvals.for_agent`)."""

    @property
    def waiting(self) -> bool:
        return self.state is QuestionState.WAITING

    def prompt(self) -> str:
        """The exact call, as the person is asked about it."""
        if self.tool == SHELL:
            return f"Run shell: {command_of(self.arguments)}?"
        return f"Run {self.tool} with {canonical_arguments(self.arguments)}?"


@dataclass(frozen=True)
class AlwaysRule:
    """Granted with ♾️: in `session`, `tool` runs without asking when its arguments hash to
    `args_sha256`, or (the shell) when its command's first word is `executable`."""

    session: str
    tool: str
    args_sha256: str | None = None
    executable: str | None = None

    def covers(self, session: str, tool: str, args_sha256: str, executable: str | None) -> bool:
        if session != self.session or tool != self.tool:
            return False
        if self.executable is not None:
            return executable == self.executable
        return args_sha256 == self.args_sha256

    def describe(self) -> str:
        what = f"command {self.executable}" if self.executable else f"args {self.args_sha256}"
        return f"{self.tool}: {what}"


def command_of(arguments: str) -> str:
    """The shell call's command, as text (the raw arguments when they hold none)."""
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return arguments
    command = value.get("command") if isinstance(value, dict) else None
    return command if isinstance(command, str) else arguments


def executable_of(tool: str, arguments: str) -> str | None:
    if tool != SHELL:
        return None
    try:
        words = shlex.split(command_of(arguments))
    except ValueError:
        return None
    return words[0] if words else None


class QuestionStore(Protocol):
    """The questions and `always` rules, on disk (store/approvals.py)."""

    async def create(self, question: Question) -> tuple[Question, bool]:
        """Keep `question` (True); the one already kept under its id (False)."""
        ...

    async def get(self, question_id: str) -> Question | None: ...

    async def decide(self, question_id: str, state: QuestionState, by: str) -> Question | None:
        """The question decided when it was waiting; None when it is unknown or decided."""
        ...

    async def waiting(self) -> list[Question]: ...

    async def rules(self, session: str) -> list[AlwaysRule]: ...

    async def add_rule(self, rule: AlwaysRule) -> None: ...

    async def remove_rule(self, session: str, index: int) -> AlwaysRule | None: ...


@dataclass(frozen=True)
class Answer:
    choice: Choice
    by: str


class Asker(Protocol):
    """How one channel puts a question: `ask` returns the answer when it has it at once
    (the terminal), or None once the prompt is sent (the answer comes through `answer`)."""

    async def ask(self, question: Question, asked_from: Inbound | None) -> Answer | None: ...


@dataclass(frozen=True)
class ApprovalRules:
    tools: tuple[str, ...] = (SHELL,)
    # Who may answer (Matrix ids, mail addresses); empty: any sender the channel let in.
    approvers: frozenset[str] = frozenset()
    timeout_s: float = 300.0
    poll_s: float = 1.0
    approvers_for: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Per person (`[[people]]` approvers): the people who may answer the questions of
    their turns, instead of `approvers`."""
    person_of: Callable[[str], str] = str
    """A sender's id to the person it is (their name in `[[people]]`, else the id)."""

    def may_answer(self, question: Question, sender: str) -> bool:
        allowed = self.approvers_for.get(self.person_of(question.asked_by))
        if question.asked_by and allowed is not None:
            return self.person_of(sender) in allowed
        return not self.approvers or sender in self.approvers


@dataclass(frozen=True)
class Verdict:
    run: bool
    decision: Decision
    by: str | None = None
    note: str = ""


class Approvals:
    """The gate every tool call passes (see the module docstring)."""

    def __init__(
        self,
        rules: ApprovalRules,
        store: QuestionStore,
        askers: Mapping[str, Asker],
        *,
        now: Callable[[], datetime] = utcnow,
        agent: str = "",
        parent: Approvals | None = None,
    ) -> None:
        self._rules = rules
        self._store = store
        self._now = now
        self._agent = agent
        # An agent's gate (`for_agent`) shares its parent's askers, waits and agents' rules.
        own: dict[str, Asker] = dict(askers)
        if parent is None:
            self._askers: Mapping[str, Asker] = own
            self._every: dict[str, Asker] = own
            self._events: dict[str, anyio.Event] = {}
            self._by_agent: dict[str, ApprovalRules] = {}
        else:
            self._askers = ChainMap(own, parent._every)
            self._every = parent._every
            self._events = parent._events
            self._by_agent = parent._by_agent
        self._by_agent[agent] = rules

    def for_agent(
        self, agent: str, rules: ApprovalRules, askers: Mapping[str, Asker] | None = None
    ) -> Approvals:
        """The gate of agent `agent`: its own rules (which tools ask, who answers, how
        long) and, for the channels in `askers`, its own askers (cron and heartbeat runs'
        allowances). The questions, the other askers (also those added later) and the
        answers are shared with this gate, so an answer taken here reaches a turn of any
        agent waiting on it, judged by that agent's rules."""
        return Approvals(rules, self._store, askers or {}, now=self._now, agent=agent, parent=self)

    def needs_approval(self, tool: str) -> bool:
        return tool in self._rules.tools

    def add_asker(self, channel: str, asker: Asker) -> None:
        """`asker` puts the questions on `channel`, for every agent's gate."""
        self._every[channel] = asker

    def may_answer(self, question: Question, sender: str) -> bool:
        """Whether `sender` may answer `question` (see `ApprovalRules.may_answer`), by the
        rules of the agent whose turn asked."""
        rules = self._by_agent.get(question.agent, self._rules)
        return rules.may_answer(question, sender)

    def question_id(self, session: str, turn_key: str | None, call: ToolCall) -> str:
        if turn_key is None:
            return uuid.uuid4().hex[:8]
        seed = f"{session}\n{turn_key}\n{call.id}\n{arguments_hash(call.name, call.arguments)}"
        return hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:8]

    async def gate(
        self,
        session: SessionId,
        channel: str,
        turn_key: str | None,
        call: ToolCall,
        asked_from: Inbound | None = None,
    ) -> Verdict:
        """Whether `call` may run; a question is put where `asked_from` (the message the
        turn answers) came from, and waited for."""
        if not self.needs_approval(call.name):
            return Verdict(True, Decision.ALLOWED)
        digest = arguments_hash(call.name, call.arguments)
        executable = executable_of(call.name, call.arguments)
        for rule in await self._store.rules(session):
            if rule.covers(session, call.name, digest, executable):
                return Verdict(True, Decision.ALWAYS, by="always rule")
        asked = self._now()
        fresh = Question(
            id=self.question_id(session, turn_key, call),
            session=session,
            channel=channel,
            tool=call.name,
            arguments=call.arguments,
            args_sha256=digest,
            asked_at=asked,
            deadline=asked + timedelta(seconds=self._rules.timeout_s),
            asked_by=asked_from.sender if asked_from is not None else "",
            agent=self._agent,
        )
        question, created = await self._store.create(fresh)
        deadline = question.deadline
        if created or (question.waiting and deadline > self._now()):
            # A resumed turn asks again: a prompt kept undelivered by a crash goes out now,
            # one sent before is not sent again (the channel's asker knows, core/prompts.py).
            question = await self._put(question, asked_from)
        if created:
            # The timeout counts from the prompt's delivery: one retried for a while still
            # gets its whole time. After a restart the kept deadline holds.
            deadline = max(deadline, self._now() + timedelta(seconds=self._rules.timeout_s))
        return self._verdict(await self._wait(question, deadline))

    async def _put(self, question: Question, asked_from: Inbound | None) -> Question:
        asker = self._askers.get(question.channel)
        if asker is None:
            decided = await self._store.decide(question.id, QuestionState.DENIED, "nobody")
            log.info("approval_unaskable", tool=question.tool, channel=question.channel)
            return decided or question
        log.info("approval_asked", question=question.id, tool=question.tool)
        answer = await asker.ask(question, asked_from)
        if answer is not None:
            await self.answer(question.id, answer.by, answer.choice, check_sender=False)
        return await self._store.get(question.id) or question

    async def _wait(self, question: Question, deadline: datetime) -> Question:
        while question.waiting:
            remaining = (deadline - self._now()).total_seconds()
            if remaining <= 0:
                await self._store.decide(question.id, QuestionState.TIMEOUT, "timeout")
            else:
                event = self._events.setdefault(question.id, anyio.Event())
                with anyio.move_on_after(min(remaining, self._rules.poll_s)):
                    await event.wait()
            question = await self._store.get(question.id) or replace(
                question, state=QuestionState.DENIED, by="lost"
            )
        self._events.pop(question.id, None)
        return question

    def _verdict(self, question: Question) -> Verdict:
        state = question.state
        if state is QuestionState.APPROVED:
            return Verdict(True, Decision.APPROVED, question.by)
        if state is QuestionState.ALWAYS:
            return Verdict(True, Decision.ALWAYS, question.by)
        if state is QuestionState.TIMEOUT:
            note = f"not run: no answer to the approval question within {self._rules.timeout_s:g} s"
            return Verdict(False, Decision.TIMEOUT, None, note)
        if question.by in _NO_ONE:
            note = f"not run: {question.tool} needs approval and {_NO_ONE[question.by]}"
        else:
            note = f"not run: {question.by} denied it"
        return Verdict(False, Decision.DENIED, question.by, note)

    async def answer(
        self, question_id: str, sender: str, choice: Choice, *, check_sender: bool = True
    ) -> str:
        """Decide a waiting question; what to tell the person who answered."""
        question = await self._store.get(question_id)
        if question is None:
            return f"no approval question {question_id}"
        if check_sender and not self.may_answer(question, sender):
            log.info("approval_answer_ignored", question=question_id, reason="not an approver")
            return ""
        decided = await self._store.decide(question_id, _STATE_OF[choice], sender)
        if decided is None:
            return f"approval question {question_id} was already decided ({question.state})"
        if choice is Choice.ALWAYS:
            executable = executable_of(decided.tool, decided.arguments)
            rule = AlwaysRule(
                decided.session,
                decided.tool,
                None if executable else decided.args_sha256,
                executable,
            )
            await self._store.add_rule(rule)
        event = self._events.get(question_id)
        if event is not None:
            event.set()
        log.info("approval_answered", question=question_id, state=str(decided.state))
        return f"{question_id}: {decided.state}"

    async def waiting(self) -> list[Question]:
        return await self._store.waiting()

    async def rules(self, session: str) -> list[AlwaysRule]:
        return await self._store.rules(session)

    async def revoke(self, session: str, index: int) -> AlwaysRule | None:
        return await self._store.remove_rule(session, index)
