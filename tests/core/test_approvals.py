"""Approvals through a real turn and the real shell, over the question files on disk: yes runs
the command once, no and a timeout never, always runs it and the next call of the same
executable without asking, a non-approver's answer changes nothing, a second answer is
ignored, a changed argument asks again; a question outlives its process (answered after a
"restart", honoured once; a deadline passed while down is a timeout); every call and decision
is one audit line."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import pytest

from squidd.config.tools import ShellSettings
from squidd.core.agent import AgentLoop
from squidd.core.approvals import (
    Answer,
    ApprovalRules,
    Approvals,
    Choice,
    Question,
    QuestionState,
)
from squidd.core.audit import Auditor
from squidd.core.memory import MemoryManager
from squidd.core.models import Inbound, SessionId, ToolCall, utcnow
from squidd.core.tools import ToolRegistry
from squidd.gateway.terminal_approval import TerminalAsker
from squidd.store.approvals import QuestionFiles
from squidd.store.audit import AuditFile
from squidd.store.jsonl import JsonlStore
from squidd.tools.shell import ShellTool
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("matrix:!room:example.org")
OWNER = "@owner:example.org"


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


class ScriptedAsker:
    """Answers at once with the next choice (a terminal), or, with None, sends nothing back
    (a chat channel: the answer comes later through `Approvals.answer`)."""

    def __init__(self, *choices: Choice | None) -> None:
        self.choices = list(choices)
        self.asked: list[Question] = []
        self.asked_from: list[Inbound | None] = []
        self.was_asked = anyio.Event()

    async def ask(self, question: Question, asked_from: Inbound | None) -> Answer | None:
        self.asked.append(question)
        self.asked_from.append(asked_from)
        self.was_asked.set()
        choice = self.choices.pop(0)
        return None if choice is None else Answer(choice, OWNER)


class Setup:
    def __init__(self, tmp_path: Path, asker: object, clock: Clock | None = None) -> None:
        self.data = tmp_path / "data"
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir(exist_ok=True)
        self.marker = self.workspace / "ran.txt"
        self.audit = AuditFile(self.data)
        self.clock = clock or Clock()
        self.approvals = Approvals(
            ApprovalRules(approvers=frozenset({OWNER}), timeout_s=300, poll_s=0.05),
            QuestionFiles(self.data),
            {"matrix": asker},  # type: ignore[dict-item]
            now=self.clock,
        )

    def loop(self, *replies: Reply | str | Callable[..., Reply]) -> AgentLoop:
        llm, _ = scripted_llm(*replies)
        shell = ShellTool(self.workspace, ShellSettings(enabled=True))
        return agent_loop(
            llm=llm,
            memory=MemoryManager(JsonlStore(self.data, workspace_dir=self.workspace)),
            registry=ToolRegistry([shell]),
            prompt=StaticPrompt("sys"),
            auditor=Auditor(self.audit, lambda text: text),
            approvals=self.approvals,
        )

    def runs(self) -> int:
        return len(self.marker.read_text().splitlines()) if self.marker.exists() else 0

    def decisions(self) -> list[str]:
        return [r["decision"] for r in self.audit.records()]


def shell(command: str = "echo ran >> ran.txt") -> Reply:
    return Reply(tool_calls=[("shell", {"command": command})])


async def test_yes_runs_once_and_no_never(tmp_path: Path) -> None:
    asker = ScriptedAsker(Choice.ONCE, Choice.NO)
    setup = Setup(tmp_path, asker)
    assert await setup.loop(shell(), "done").run(SESSION, "go", "matrix", turn_id="t1") == "done"
    assert setup.runs() == 1
    assert await setup.loop(shell(), "ok").run(SESSION, "again", "matrix", turn_id="t2") == "ok"
    assert setup.runs() == 1 and len(asker.asked) == 2
    assert asker.asked[0].prompt() == "Run shell: echo ran >> ran.txt?"
    assert setup.decisions() == ["approved", "denied"]
    assert [r["by"] for r in setup.audit.records()] == [OWNER, OWNER]
    assert setup.audit.verify()[0] == 2


async def test_always_runs_and_the_next_call_of_that_executable_without_asking(
    tmp_path: Path,
) -> None:
    asker = ScriptedAsker(Choice.ALWAYS, Choice.NO)
    setup = Setup(tmp_path, asker)
    await setup.loop(shell(), "done").run(SESSION, "go", "matrix", turn_id="t1")
    await setup.loop(shell(), "done").run(SESSION, "go", "matrix", turn_id="t2")
    assert setup.runs() == 2 and len(asker.asked) == 1
    # Another executable is asked about again (and refused here).
    await setup.loop(shell("touch other.txt"), "done").run(SESSION, "x", "matrix", turn_id="t3")
    assert len(asker.asked) == 2 and not (setup.workspace / "other.txt").exists()
    assert setup.decisions() == ["always", "always", "denied"]
    rules = await setup.approvals.rules(SESSION)
    assert [r.describe() for r in rules] == ["shell: command echo"]
    assert await setup.approvals.revoke(SESSION, 1) == rules[0]
    assert await setup.approvals.rules(SESSION) == []


async def _answer_when_asked(
    setup: Setup, asker: ScriptedAsker, answers: list[tuple[str, Choice]], replies: list[str]
) -> None:
    await asker.was_asked.wait()
    question = asker.asked[-1].id
    for sender, choice in answers:
        replies.append(await setup.approvals.answer(question, sender, choice))


async def test_an_answer_later_from_the_approver_only_and_only_once(tmp_path: Path) -> None:
    asker = ScriptedAsker(None)
    setup = Setup(tmp_path, asker)
    replies: list[str] = []
    stranger = "@stranger:example.org"
    answers = [(stranger, Choice.ONCE), (OWNER, Choice.ONCE), (OWNER, Choice.NO)]
    async with anyio.create_task_group() as tg:
        tg.start_soon(_answer_when_asked, setup, asker, answers, replies)
        reply = await setup.loop(shell(), "done").run(SESSION, "go", "matrix", turn_id="t1")
    assert reply == "done" and setup.runs() == 1
    question = asker.asked[0].id
    already = f"approval question {question} was already decided (approved)"
    assert replies == ["", f"{question}: approved", already]
    assert setup.decisions() == ["approved"]
    assert await setup.approvals.waiting() == []


async def test_no_answer_in_time_is_denied(tmp_path: Path) -> None:
    asker = ScriptedAsker(None)
    setup = Setup(tmp_path, asker)

    ran = anyio.Event()

    async def later() -> None:
        await asker.was_asked.wait()
        while not ran.is_set():  # the timeout counts from the delivery: past it, whenever
            setup.clock.now += timedelta(seconds=301)
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        await setup.loop(shell(), "done").run(SESSION, "go", "matrix", turn_id="t1")
        ran.set()
    assert setup.runs() == 0 and setup.decisions() == ["timeout"]


class SlowAsker(ScriptedAsker):
    """A chat channel whose prompt took 250 s of delivery retries to go out."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(None)
        self.clock = clock

    async def ask(self, question: Question, asked_from: Inbound | None) -> Answer | None:
        self.clock.now += timedelta(seconds=250)
        return await super().ask(question, asked_from)


async def test_the_timeout_counts_from_the_prompt_s_delivery(tmp_path: Path) -> None:
    # Asked at 0, delivered at 250, answered at 350: within 300 s of the delivery, it counts.
    setup = Setup(tmp_path, None)
    asker = SlowAsker(setup.clock)
    setup.approvals.add_asker("matrix", asker)
    call = ToolCall(id="c1", name="shell", arguments='{"command": "echo ran >> ran.txt"}')

    async def answer_late() -> None:
        await asker.was_asked.wait()
        setup.clock.now += timedelta(seconds=100)
        [waiting] = await setup.approvals.waiting()
        await setup.approvals.answer(waiting.id, OWNER, Choice.ONCE)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_late)
        verdict = await setup.approvals.gate(SESSION, "matrix", "turn-1", call)
    assert verdict.run and verdict.by == OWNER


async def test_a_question_outlives_its_process(tmp_path: Path) -> None:
    call = ToolCall(id="c1", name="shell", arguments='{"command": "echo ran >> ran.txt"}')
    first = Setup(tmp_path, ScriptedAsker(None, None))
    with anyio.move_on_after(0.3):  # the process dies while the question waits
        await first.approvals.gate(SESSION, "matrix", "turn-1", call)
    [waiting] = await first.approvals.waiting()

    # After the restart: the answer arrives, the resumed turn meets the same question,
    # runs without asking again; a second answer is ignored.
    asker = ScriptedAsker()
    second = Setup(tmp_path, asker)
    assert (
        await second.approvals.answer(waiting.id, OWNER, Choice.ONCE) == f"{waiting.id}: approved"
    )
    verdict = await second.approvals.gate(SESSION, "matrix", "turn-1", call)
    assert verdict.run and verdict.by == OWNER and asker.asked == []
    assert "already decided" in await second.approvals.answer(waiting.id, OWNER, Choice.NO)

    # A changed argument is another question.
    changed = ToolCall(id="c1", name="shell", arguments='{"command": "rm -rf ran.txt"}')
    assert second.approvals.question_id(SESSION, "turn-1", changed) != waiting.id

    # A deadline that passed while the daemon was down is a timeout, not a new question.
    other = ToolCall(id="c2", name="shell", arguments='{"command": "echo two"}')
    with anyio.move_on_after(0.3):
        await first.approvals.gate(SESSION, "matrix", "turn-1", other)
    third = Setup(tmp_path, ScriptedAsker())
    third.clock.now = first.clock.now + timedelta(seconds=600)
    verdict = await third.approvals.gate(SESSION, "matrix", "turn-1", other)
    assert not verdict.run and verdict.decision == "timeout"
    question = await QuestionFiles(tmp_path / "data").get(
        third.approvals.question_id(SESSION, "turn-1", other)
    )
    assert question is not None and question.state is QuestionState.TIMEOUT


async def test_the_terminal_asks_y_runs_once_n_never(tmp_path: Path) -> None:
    typed = iter(["y", "n", ""])
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(typed)

    asker = TerminalAsker(is_tty=True, read=read)
    setup = Setup(tmp_path, asker)
    setup.approvals.add_asker("terminal", asker)
    for turn in ("t1", "t2", "t3"):
        await setup.loop(shell(), "done").run(SESSION, "go", "terminal", turn_id=turn)
    assert setup.runs() == 1
    assert prompts[0] == "\nRun shell: echo ran >> ran.txt? [y/N] "
    assert setup.decisions() == ["approved", "denied", "denied"]


async def test_without_a_terminal_the_answer_is_no(tmp_path: Path) -> None:
    asker = TerminalAsker(is_tty=False)
    setup = Setup(tmp_path, asker)
    setup.approvals.add_asker("terminal", asker)
    llm_seen: list[str] = []

    def final(body: dict[str, object]) -> Reply:
        llm_seen.append(str(body["messages"]))
        return Reply(content="could not")

    await setup.loop(shell(), final).run(SESSION, "go", "terminal")
    assert setup.runs() == 0 and setup.decisions() == ["denied"]
    assert "there is no terminal to ask" in llm_seen[0]
    assert asker.refused and "no terminal" in asker.refused[0]


async def test_the_question_goes_where_the_turn_s_message_came_from(tmp_path: Path) -> None:
    # The message the turn answers is an argument of the turn, handed to the asker: a turn
    # that answers none (a sub-agent's run) has no one to ask, whatever ran before it.
    asker = ScriptedAsker(Choice.ONCE, Choice.NO)
    setup = Setup(tmp_path, asker)
    message = Inbound("matrix", "$m1", SessionId(SESSION), OWNER, "go")
    await setup.loop(shell(), "done").run(SESSION, "go", "matrix", turn_id="t1", asked_from=message)
    await setup.loop(shell(), "not run").run(SESSION, "again", "matrix", turn_id="t2")
    assert asker.asked_from == [message, None]
    assert [q.asked_by for q in asker.asked] == [OWNER, ""]  # whose approvers answer it


def test_a_persons_approvers_answer_for_her_and_only_they() -> None:
    """Per person (`[[people]]` approvers): the kid's questions are the parents' to answer
    (by any of their ids), not the kid's nor a guest's; the others' as before."""
    names = {"@kid:example.org": "kid", "@mum:example.org": "mum", "mum@example.org": "mum"}
    rules = ApprovalRules(
        approvers=frozenset({OWNER, "@kid:example.org"}),
        approvers_for={"kid": frozenset({"mum", "dad"})},
        person_of=lambda sender: names.get(sender, sender),
    )
    now = utcnow()

    def question(asked_by: str) -> Question:
        return Question("q1", "s", "matrix", "shell", "{}", "h", now, now, asked_by=asked_by)

    kids = question("@kid:example.org")
    assert rules.may_answer(kids, "@mum:example.org")
    assert rules.may_answer(kids, "mum@example.org")
    assert not rules.may_answer(kids, "@kid:example.org")
    assert not rules.may_answer(kids, OWNER)
    owners = question(OWNER)
    assert rules.may_answer(owners, OWNER) and rules.may_answer(owners, "@kid:example.org")
    assert not rules.may_answer(owners, "@mum:example.org")
    cron = question("")  # nobody's turn: the approvers of the daemon
    assert rules.may_answer(cron, OWNER) and not rules.may_answer(cron, "@mum:example.org")
