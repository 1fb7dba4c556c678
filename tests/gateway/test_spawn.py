"""spawn: a sub-agent in its own session with a restricted tool set, waiting or refused
(depth cap, caps on how many run, a timeout), driven by the scripted LLM on loopback."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from structlog.testing import capture_logs

from squidd.config import Settings
from squidd.core.models import SessionId
from squidd.core.runs import PendingRun
from squidd.errors import ToolError
from squidd.gateway.runtime import Runtime, build_runtime
from squidd.gateway.turn_tools import TurnScope, TurnTools
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = pytest.mark.anyio

PARENT = SessionId("!room:example.org")


def settings_for(tmp_path: Path, llm: FakeLLM, **spawn: Any) -> Settings:
    return Settings.model_validate(
        {
            "llm": {"base_url": llm.base_url, "api_key": "sk-spawn-test", "max_retries": 0},
            "storage": {"data_dir": str(tmp_path)},
            "tools": {
                "shell": {"enabled": True},
                "spawn": spawn,
                "policy": {"rules": [{"channel": "matrix", "allow": ["shell"]}]},
            },
        }
    )


def tool_names(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def first_user(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m["role"] == "user"]
    return str(users[0]["content"]) if users else ""


def last(request: dict[str, Any]) -> dict[str, Any]:
    return dict(request["messages"][-1])


async def parent_turn(runtime: Runtime, text: str, turn_tools: TurnTools | None = None) -> str:
    scope = TurnScope(PARENT, "matrix", reply_to="matrix:!room:example.org")
    tools = (turn_tools or TurnTools(runtime)).for_turn(scope)
    return await runtime.agent.run(PARENT, text, "matrix", extra_tools=tools)


async def test_wait_returns_the_report_from_a_restricted_sub_session(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    def respond(request: dict[str, Any]) -> Reply:
        if first_user(request) == "count the moons of mars":
            return Reply("Mars has two moons: Phobos and Deimos.")
        if last(request)["role"] == "tool":
            return Reply("The sub-agent says: " + str(last(request)["content"]))
        return Reply(tool_calls=[("spawn", {"task": "count the moons of mars"})])

    fake_llm.responder = respond
    runtime = build_runtime(settings_for(tmp_path, fake_llm))
    try:
        reply = await parent_turn(runtime, "how many moons?")
    finally:
        await runtime.aclose()
    assert reply == "The sub-agent says: Mars has two moons: Phobos and Deimos."
    parent_request, sub_request = fake_llm.chat_requests[:2]
    assert {"spawn", "shell", "write_file"} <= tool_names(parent_request)
    sub_tools = tool_names(sub_request)
    assert "spawn" not in sub_tools and "shell" not in sub_tools and "write_file" not in sub_tools
    assert {"read_file", "search_history"} <= sub_tools
    assert sub_request["messages"][-1] == {"role": "user", "content": "count the moons of mars"}
    subs = [json.loads(p.read_text()) for p in (tmp_path / "sessions").glob("*.meta.json")]
    histories = sorted(p.name for p in (tmp_path / "sessions").glob("*sub*.jsonl"))
    assert len(histories) == 1 and not subs  # its own session file, beside the parent's


async def test_a_spawn_asked_to_spawn_forever_stops_at_the_depth_cap(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    def respond(request: dict[str, Any]) -> Reply:
        if last(request)["role"] == "tool":
            return Reply(f"done ({str(last(request)['content'])[:60]})")
        if "spawn" in tool_names(request):
            return Reply(tool_calls=[("spawn", {"task": "spawn another sub-agent, forever"})])
        return Reply("I cannot spawn here.")

    fake_llm.responder = respond
    runtime = build_runtime(settings_for(tmp_path, fake_llm, allow_nested=True, max_depth=2))
    try:
        with capture_logs() as logs:
            with anyio.fail_after(60):
                reply = await parent_turn(runtime, "go")
    finally:
        await runtime.aclose()
    assert reply.startswith("done")
    refused = [e for e in logs if e["event"] == "spawn_refused"]
    assert [(e["reason"], e["depth"]) for e in refused] == [("depth", 3)]
    assert sum(e["event"] == "subagent_started" for e in logs) == 2
    # without nesting, a sub-agent is not even offered spawn
    fake_llm.requests.clear()
    runtime = build_runtime(settings_for(tmp_path, fake_llm))
    try:
        reply = await parent_turn(runtime, "go")
    finally:
        await runtime.aclose()
    assert reply == "done (I cannot spawn here.)"


async def test_caps_refuse_with_a_log_line_and_the_turn_goes_on(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fired: list[PendingRun] = []

    async def fire(run: PendingRun) -> None:
        fired.append(run)

    runtime = build_runtime(settings_for(tmp_path, fake_llm, max_per_session=1, max_running=2))
    try:
        agents = TurnTools(runtime, fire=fire).subagents
        sub = await agents.start_background(PARENT, "matrix", "task one", "matrix:!room:x")
        assert sub.startswith(f"{PARENT}/sub:")
        assert fired[0].session_id == sub and fired[0].target == "matrix:!room:x"
        assert fired[0].source_id.startswith("matrix:")
        with capture_logs() as logs, pytest.raises(ToolError, match="per session"):
            await agents.start_background(PARENT, "matrix", "task two", "matrix:!room:x")
        assert [e["cap"] for e in logs if e["event"] == "spawn_refused"] == ["per session"]
        await agents.start_background(SessionId("other"), "email", "task", "")
        with pytest.raises(ToolError, match="in the daemon"):
            await agents.start_background(SessionId("third"), "email", "task", "")
        with pytest.raises(ToolError, match="need the daemon"):
            await TurnTools(runtime).subagents.start_background(PARENT, "matrix", "t", "")
    finally:
        await runtime.aclose()


async def test_a_sub_agent_that_takes_too_long_is_stopped(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    def respond(request: dict[str, Any]) -> Reply:
        if first_user(request) == "slow task":
            return Reply("too late", delay=3)
        if last(request)["role"] == "tool":
            return Reply("parent saw: " + str(last(request)["content"]))
        return Reply(tool_calls=[("spawn", {"task": "slow task"})])

    fake_llm.responder = respond
    runtime = build_runtime(settings_for(tmp_path, fake_llm, timeout_s=0.5))
    try:
        with capture_logs() as logs:
            reply = await parent_turn(runtime, "go")
    finally:
        await runtime.aclose()
    assert reply == "parent saw: Error: the sub-agent did not finish within 0.5 s"
    assert any(e["event"] == "subagent_timed_out" for e in logs)


async def test_a_sub_agent_gets_no_tool_its_conversation_is_refused(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    def respond(request: dict[str, Any]) -> Reply:
        if first_user(request) == "fetch a page":
            return Reply("ok")
        if last(request)["role"] == "tool":
            return Reply("done")
        return Reply(tool_calls=[("spawn", {"task": "fetch a page"})])

    fake_llm.responder = respond
    settings = Settings.model_validate(
        {
            "llm": {"base_url": fake_llm.base_url, "api_key": "sk-spawn-test", "max_retries": 0},
            "storage": {"data_dir": str(tmp_path)},
            "tools": {"policy": {"rules": [{"channel": "matrix", "deny": ["web_fetch"]}]}},
        }
    )
    runtime = build_runtime(settings)
    try:
        assert await parent_turn(runtime, "go") == "done"
    finally:
        await runtime.aclose()
    parent_request, sub_request = fake_llm.chat_requests[:2]
    assert "web_fetch" not in tool_names(parent_request)
    assert "web_fetch" not in tool_names(sub_request)
    assert "read_file" in tool_names(sub_request)


async def test_cancelling_the_parent_turn_cancels_its_waiting_sub_agent(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    asked = threading.Event()

    def respond(request: dict[str, Any]) -> Reply:
        if first_user(request) == "endless task":
            asked.set()
            return Reply("never", delay=30)
        return Reply(tool_calls=[("spawn", {"task": "endless task"})])

    fake_llm.responder = respond
    runtime = build_runtime(settings_for(tmp_path, fake_llm))
    turn_tools = TurnTools(runtime)
    agents = turn_tools.subagents
    try:
        with capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                tg.start_soon(parent_turn, runtime, "go", turn_tools)
                assert await anyio.to_thread.run_sync(asked.wait, 30)
                assert agents.running() == 1
                tg.cancel_scope.cancel()
    finally:
        await runtime.aclose()
    assert agents.running() == 0
    assert any(e["event"] == "subagent_started" for e in logs)
    assert not any(e["event"] == "subagent_finished" for e in logs)
