"""A background sub-agent's report becomes a run of its conversation's session (not a
message sent past the conversation's agent), and a redelivered sub-agent run hands on the
same report run again, so the router's handled record answers it once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.core.models import InboundKind
from squidd.core.runs import PendingRun
from squidd.gateway.runtime import build_runtime
from squidd.gateway.subagents import HANDED_ON
from squidd.gateway.turn_tools import TurnTools
from squidd.tools.spawn import REPORT_CHANNEL, SUBAGENT_CHANNEL
from tests.gateway.test_spawn import PARENT, settings_for
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = pytest.mark.anyio


async def test_the_report_is_handed_on_as_a_run_of_the_conversation_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    requests: list[dict[str, Any]] = []

    def respond(request: dict[str, Any]) -> Reply:
        requests.append(request)
        return Reply("Squids have 3 hearts.")

    fake_llm.responder = respond
    fired: list[PendingRun] = []

    async def fire(run: PendingRun) -> None:
        fired.append(run)

    runtime = build_runtime(settings_for(tmp_path, fake_llm))
    try:
        agents = TurnTools(runtime, fire=fire).subagents
        sub = await agents.start_background(PARENT, "matrix", "count hearts", "matrix:!room:x")
        run = fired.pop()
        assert run.channel == SUBAGENT_CHANNEL and run.quiet_reply == HANDED_ON

        async def ack() -> None:
            return None

        # The sub-agent's own run answers nothing; its report is a run of the conversation.
        assert await agents.run_background_turn(run.inbound(ack)) == HANDED_ON
        report = fired.pop()
        assert report.channel == REPORT_CHANNEL
        assert report.kind is InboundKind.SUBAGENT_REPORT
        assert report.conversation_channel == "matrix"
        assert report.session_id == PARENT
        assert report.target == "matrix:!room:x"
        assert report.source_id == run.source_id
        assert report.text.startswith("Sub-agent report (count hearts):\n\nSquids have 3 hearts.")
        assert agents.running() == 0

        # A crash before the sub-agent's run was acknowledged: it is handed on again, the
        # finished sub-agent turn is reused (no second model call) and the same report run
        # (same channel and source id) is fired, which the handled record answers once.
        assert await agents.run_background_turn(run.inbound(ack)) == HANDED_ON
        assert fired.pop() == report
        assert len(requests) == 1
        window = await runtime.store.load_window(sub)
        assert [m.content for m in window.messages if m.role == "user"] == ["count hearts"]
        assert (await runtime.store.load_window(PARENT)).messages == []  # only its own turns
    finally:
        await runtime.aclose()


async def test_a_failed_sub_agent_is_reported_to_the_conversation_not_apologised_past_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The model is down for the sub-agent: its run still hands on a report (saying so) as a
    run of the conversation, so the conversation's own turn answers the user and the failure
    is in the parent's history, instead of the router's apology going out for the sub-agent's
    run where the parent never sees it."""
    down = True

    def respond(request: dict[str, Any]) -> Reply:
        return Reply(status=503) if down else Reply("The helper could not finish; sorry.")

    fake_llm.responder = respond
    fired: list[PendingRun] = []

    async def fire(run: PendingRun) -> None:
        fired.append(run)

    async def ack() -> None:
        return None

    runtime = build_runtime(settings_for(tmp_path, fake_llm))
    try:
        agents = TurnTools(runtime, fire=fire).subagents
        await agents.start_background(PARENT, "matrix", "count hearts", "matrix:!room:x")
        run = fired.pop()
        assert await agents.run_background_turn(run.inbound(ack)) == HANDED_ON
        report = fired.pop()
        assert report.kind is InboundKind.SUBAGENT_REPORT and report.session_id == PARENT
        assert "(failed: the language model could not answer" in report.text
        assert agents.running() == 0

        down = False  # the conversation's turn on the report, as the router runs it
        answer = await runtime.agent.run(PARENT, report.text, "matrix")
        assert answer == "The helper could not finish; sorry."
        parent = (await runtime.store.load_window(PARENT)).messages
        assert [m.role for m in parent] == ["user", "assistant"]
        assert "(failed: the language model could not answer" in str(parent[0].content)
    finally:
        await runtime.aclose()
