"""The daemon in this process, with in-memory channels and the scripted LLM server:
concurrency and ordering, supervision, durable acknowledgement, apologies."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from squidd.core.models import PendingReply, SessionId
from squidd.core.ports import ChannelState
from squidd.core.router import APOLOGY
from squidd.gateway.build import build_daemon
from squidd.gateway.channels import fixed_channels
from squidd.gateway.status import DaemonAlreadyRunningError, socket_path
from squidd.store.outbox import OutboxDir
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import eventually, make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


def last_user(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m["role"] == "user"]
    return str(users[-1]["content"])


async def test_fifty_sessions_three_messages_each(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.responder = lambda req: Reply(content=f"re: {last_user(req)}", delay=0.3)
    settings = make_settings(
        tmp_path / "data", fake_llm.base_url, gateway={"max_concurrent_turns": 50}
    )
    channel = MemoryChannel("memory")
    sessions, per_session, delay = 50, 3, 0.3
    async with running_daemon(settings, [channel]):
        started = time.monotonic()
        for i in range(per_session):
            for s in range(sessions):
                channel.inject(f"s{s} m{i}", session=f"s{s}", sender=f"user{s}")
        await channel.wait_for(sessions * per_session)
        await channel.wait_for(sessions * per_session, what="acked")
        wall = time.monotonic() - started
    serial = sessions * per_session * delay
    print(f"\n{sessions} sessions x {per_session} messages, LLM {delay}s each: ")
    print(f"  wall {wall:.2f}s, serial would be {serial:.0f}s")
    assert len(channel.sent) == sessions * per_session
    for s in range(sessions):
        replies = [sent.text for sent in channel.sent if sent.session_id == f"s{s}"]
        assert replies == [f"re: s{s} m{i}" for i in range(per_session)]
        assert {sent.target for sent in channel.sent if sent.session_id == f"s{s}"} == {f"user{s}"}
    assert len(set(channel.acked)) == sessions * per_session
    # Concurrency shown by the model server, not by a clock: many sessions' turns were
    # waiting on the 0.3 s model at the same moment (the cap is 50, one turn per session).
    print(f"  at most {fake_llm.max_in_flight} model calls at once")
    assert fake_llm.max_in_flight >= sessions // 2


async def test_flapping_channel_restarted_while_another_answers(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        tmp_path / "data",
        fake_llm.base_url,
        gateway={"restart_initial_delay_s": 0.05, "restart_max_delay_s": 0.2},
    )
    good = MemoryChannel("good")
    flaky = MemoryChannel("flaky", fail_runs=5)
    with capture_logs() as logs:
        async with running_daemon(settings, [good, flaky]) as daemon:
            good.inject("hello while flaky flaps", session="g")
            await good.wait_for(1)
            await eventually(lambda: flaky.runs == 6)
            await eventually(lambda: daemon.supervisor.children["flaky"].state == "connected")
            flaky.inject("and now you?", session="f")
            await flaky.wait_for(1)
            health = daemon.supervisor.children["flaky"]
            assert health.restarts == 5
            snapshot = await daemon.snapshot()
    assert good.sent[0].text == "echo: hello while flaky flaps"
    assert flaky.sent[0].text == "echo: and now you?"
    restarts = [e for e in logs if e["event"] == "child_restart_scheduled"]
    assert [e["attempt"] for e in restarts if e["child"] == "flaky"] == [1, 2, 3, 4, 5]
    for event in restarts:
        ceiling = min(0.2, 0.05 * 2 ** (event["attempt"] - 1))
        assert ceiling / 2 <= event["retry_in_s"] <= ceiling + 1e-3
    assert not [e for e in restarts if e["child"] == "good"]
    assert [c["name"] for c in snapshot["children"] if c["kind"] == "channel"] == [
        "good",
        "flaky",
    ]


async def test_permanent_failure_parks_the_channel_with_its_reason(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    good = MemoryChannel("good")
    broken = MemoryChannel("broken", permanent="token rejected by the server (M_UNKNOWN_TOKEN)")
    async with running_daemon(settings, [broken, good]) as daemon:
        good.inject("still there?")
        await good.wait_for(1)
        health = daemon.supervisor.children["broken"]
        assert health.state == ChannelState.FAILED
        assert "M_UNKNOWN_TOKEN" in health.detail
        assert broken.runs == 1


async def test_model_down_gets_an_apology_and_keeps_the_message(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda req: Reply(status=500)
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]) as daemon:
        inbound = channel.inject("are you there?", session="sad")
        await channel.wait_for(1, what="acked")
        window = await daemon.runtime.store.load_window(SessionId("sad"))
    assert [sent.text for sent in channel.sent] == [APOLOGY]
    assert channel.acked == [inbound.source_id]
    assert any(m.role == "user" and m.content == "are you there?" for m in window.messages)


async def test_failed_send_is_retried_and_acked_only_after_delivery(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    channel = MemoryChannel("memory", fail_sends=3)
    with capture_logs() as logs:
        async with running_daemon(settings, [channel]):
            channel.inject("hi")
            await channel.wait_for(1, what="acked")
    failures = [e for e in logs if e["event"] == "reply_delivery_failed"]
    assert [e["attempt"] for e in failures] == [1, 2, 3]
    assert [sent.text for sent in channel.sent] == ["echo: hi"]
    assert len(fake_llm.chat_requests) == 1
    sent_at = next(i for i, e in enumerate(logs) if e["event"] == "reply_sent")
    assert all(i < sent_at for i, e in enumerate(logs) if e["event"] == "reply_delivery_failed")


async def test_reply_in_outbox_is_resent_without_asking_the_model(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The daemon died after the turn and before delivery: the same reply goes out."""
    data = tmp_path / "data"
    await OutboxDir(data).put(
        "memory",
        "evt-1",
        PendingReply("memory", "u", "the reply computed before the crash", SessionId("s1")),
    )
    settings = make_settings(data, fake_llm.base_url)
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]) as daemon:
        channel.inject("question", source_id="evt-1")
        await channel.wait_for(1, what="acked")
        assert await daemon.outbox.count() == 0
    assert [sent.text for sent in channel.sent] == ["the reply computed before the crash"]
    assert fake_llm.chat_requests == []


async def test_redelivered_message_is_acked_not_answered_again(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    settings = make_settings(data, fake_llm.base_url)
    first = MemoryChannel("memory")
    async with running_daemon(settings, [first]):
        first.inject("once", source_id="evt-7")
        await first.wait_for(1, what="acked")
    # A new daemon on the same data dir: the source delivers the same event again.
    second = MemoryChannel("memory")
    with capture_logs() as logs:
        async with running_daemon(settings, [second]):
            second.inject("once", source_id="evt-7")
            await second.wait_for(1, what="acked")
    assert len(first.sent) == 1
    assert second.sent == []
    assert len(fake_llm.chat_requests) == 1
    assert any(e["event"] == "redelivery_skipped" for e in logs)


async def test_idle_sessions_are_released(tmp_path: Path, fake_llm: FakeLLM) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]) as daemon:
        for s in range(20):
            channel.inject("hi", session=f"s{s}")
        await channel.wait_for(20, what="acked")
        await eventually(lambda: daemon.router.stats()["sessions"] == 0)
        assert daemon.router.stats() == {"in_flight": 0, "queued": 0, "sessions": 0}


async def test_every_turn_gets_memory_and_cron_tools(tmp_path: Path, fake_llm: FakeLLM) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    channel = MemoryChannel("memory")
    fake_llm.push(
        Reply(tool_calls=[("cron_add", {"name": "tea", "prompt": "tea time", "every": "1h"})]),
        Reply(content="scheduled"),
    )
    async with running_daemon(settings, [channel]) as daemon:
        channel.inject("remind me hourly", session="room", sender="!room:example.org")
        await channel.wait_for(1, what="acked")
        jobs = await daemon.jobs.load()
    offered = {t["function"]["name"]: t["function"] for t in fake_llm.chat_requests[0]["tools"]}
    assert {"memory_write", "search_history", "load_tools"} <= set(offered)
    # The cron tools are offered on demand (tools.on_demand): listed, their schemas not sent.
    loader = offered["load_tools"]["description"]
    assert all(f"{name}:" in loader for name in ("cron_add", "cron_list", "cron_remove"))
    assert [(job.name, job.target, job.created_by) for job in jobs] == [
        ("tea", "memory:!room:example.org", "room")
    ]


async def test_a_second_daemon_on_the_same_data_dir_changes_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """It must find the running daemon before touching any state: compacting the handled
    record under the running daemon would drop the ids that daemon appends meanwhile."""
    data = tmp_path / "data"
    settings = make_settings(data, fake_llm.base_url, gateway={"handled_retention_days": 1})
    handled = data / "gateway" / "handled.jsonl"
    handled.parent.mkdir(parents=True)
    handled.write_text(
        '{"channel":"c","id":"old","at":"2000-01-01T00:00:00+00:00"}\n'
        '{"channel":"c","id":"new","at":"2999-01-01T00:00:00+00:00"}\n'
    )
    before = handled.read_bytes()
    daemon = build_daemon(
        settings, channels=fixed_channels(MemoryChannel("memory")), handle_signals=False
    )
    try:
        async with await anyio.create_unix_listener(socket_path(settings)):
            with pytest.raises(BaseExceptionGroup) as info:
                await daemon.serve()
    finally:
        await daemon.runtime.aclose()
    assert info.group_contains(DaemonAlreadyRunningError)
    assert handled.read_bytes() == before


async def test_media_older_than_the_lifetime_is_removed_by_the_daemon(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    settings = make_settings(data, fake_llm.base_url, media={"lifetime_hours": 1})
    room = data / "media" / "room-0123"
    room.mkdir(parents=True)
    old, fresh = room / "old.png", room / "fresh.png"
    old.write_bytes(b"old")
    fresh.write_bytes(b"fresh")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    async with running_daemon(settings, [MemoryChannel("memory")]):
        assert sorted(p.name for p in room.iterdir()) == ["fresh.png"]


async def test_saved_tool_results_past_their_retention_are_swept(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    settings = make_settings(data, fake_llm.base_url, tools={"result_retention_days": 7})
    results = data / "tool-results"
    results.mkdir(parents=True)
    old, fresh = results / "s-old.txt", results / "s-fresh.txt"
    old.write_text("old")
    fresh.write_text("fresh")
    eight_days_ago = time.time() - 8 * 86400
    os.utime(old, (eight_days_ago, eight_days_ago))
    async with running_daemon(settings, [MemoryChannel("memory")]):
        await eventually(lambda: not old.exists())
        assert fresh.read_text() == "fresh"


async def test_a_channel_named_like_a_scheduled_run_gets_ordinary_turns(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """What a turn is comes from its kind, not from the channel's name: channels called
    "limits", "heartbeat", "subagent" and "subagent_report" are answered by the model like
    any other, count as activity and are filed as turns."""
    fake_llm.responder = lambda req: Reply(content=f"re: {last_user(req)}", usage=(10, 1, 0))
    names = ("limits", "heartbeat", "subagent", "subagent_report")
    channels = [MemoryChannel(name) for name in names]
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    async with running_daemon(settings, channels) as daemon:
        for channel in channels:
            channel.inject(f"hi {channel.name}", session=f"s-{channel.name}", sender="u:1")
        for channel in channels:
            await channel.wait_for(1)
        turns = daemon.turns.done
        records = await daemon.runtime.usage.read()
    for channel in channels:
        assert [s.text for s in channel.sent] == [f"re: hi {channel.name}"]
    assert turns == len(names)
    assert {r.purpose for r in records} == {"turn"}
