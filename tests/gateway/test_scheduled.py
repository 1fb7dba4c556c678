"""Cron jobs and the heartbeat, through the daemon, with a clock the test moves."""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from squidd.cli import main
from squidd.core.cron import CronJob, make_job
from squidd.core.cron_service import CronJobs
from squidd.core.models import InboundKind, Outbound, SessionId
from squidd.core.runs import PendingRun
from squidd.errors import ToolError
from squidd.store.cron_jobs import JobsFile
from squidd.store.parked import ParkedDir
from squidd.store.pending_runs import PendingRunsDir
from squidd.tools.cron import CronToolContext, cron_tools
from tests.support.clock import FakeClock
from tests.support.config import data_dir_config
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import eventually, make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


async def test_every_minute_and_one_shot_jobs_deliver(tmp_path: Path, fake_llm: FakeLLM) -> None:
    data = tmp_path / "data"
    clock = FakeClock()
    start = clock.now()
    jobs = JobsFile(data)
    every = make_job(
        "minutely",
        "tick",
        cron="* * * * *",
        timezone="Europe/Paris",
        target="memory:!room:example.org",
        now=start,
    )
    once = make_job(
        "once",
        "just once",
        at=(start + timedelta(seconds=90)).isoformat(),
        timezone="UTC",
        target="memory:me@example.org",
        now=start,
    )
    await jobs.modify(lambda existing: [*existing, every, once])
    settings = make_settings(data, fake_llm.base_url)
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel], clock=clock) as daemon:
        clock.advance(60)
        await channel.wait_for(1)
        clock.advance(30)
        await channel.wait_for(2)
        clock.advance(30)
        await channel.wait_for(3)
        await eventually(lambda: daemon.router.stats()["in_flight"] == 0)
        stored = await jobs.load()
    assert [(s.target, s.text, s.session_id) for s in channel.sent] == [
        ("!room:example.org", "echo: tick", "cron:minutely"),
        ("me@example.org", "echo: just once", "cron:once"),
        ("!room:example.org", "echo: tick", "cron:minutely"),
    ]
    assert [job.name for job in stored] == ["minutely"]
    assert stored[0].next_run == start + timedelta(minutes=3)


async def test_missed_runs_within_grace_run_once_else_are_skipped(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    clock = FakeClock()
    now = clock.now()
    recent = make_job("recent", "r", every="1h", timezone="UTC", target="memory:a", now=now)
    old = make_job("old", "o", every="1h", timezone="UTC", target="memory:b", now=now)
    # The daemon was down: "recent" was due 2 minutes ago, "old" 3 hours ago.
    recent = replace(recent, next_run=now - timedelta(minutes=2))
    old = replace(old, next_run=now - timedelta(hours=3))
    await JobsFile(data).modify(lambda _: [recent, old])
    settings = make_settings(data, fake_llm.base_url, cron={"misfire_grace_s": 300})
    channel = MemoryChannel("memory")
    with capture_logs() as logs:
        async with running_daemon(settings, [channel], clock=clock):
            await channel.wait_for(1)
            await eventually(lambda: any(e["event"] == "cron_run_missed" for e in logs))
    assert [s.text for s in channel.sent] == ["echo: r"]
    missed = [e for e in logs if e["event"] == "cron_run_missed"]
    assert [e["job"] for e in missed] == ["old"]
    assert len(fake_llm.chat_requests) == 1


async def test_a_corrupt_jobs_file_is_reported_and_never_overwritten(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    path = JobsFile(data).path
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1, "jobs": [ {"name": "x", oops')
    before = path.read_bytes()
    settings = make_settings(data, fake_llm.base_url)
    async with running_daemon(settings, [MemoryChannel("memory")]) as daemon:
        await eventually(lambda: daemon.supervisor.children["cron"].state == "failed")
        assert "not a valid jobs file" in daemon.supervisor.children["cron"].detail
    assert path.read_bytes() == before
    # `squidd cron` as its own process runs it: outside this test's event loop.
    cli = functools.partial(anyio.to_thread.run_sync, main)
    assert await cli(["--config", str(tmp_path / "none.toml"), "cron", "list"]) == 2
    env_cfg = data_dir_config(tmp_path, data)
    args = ["--config", str(env_cfg), "cron", "add", "--name", "n", "--prompt", "p"]
    assert await cli([*args, "--every", "1h"]) == 1
    assert path.read_bytes() == before


def test_cron_cli_add_list_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = data_dir_config(tmp_path)
    base = ["--config", str(cfg), "cron"]
    add = [*base, "add", "--name", "standup", "--prompt", "Summarise my day"]
    assert main([*add, "--cron", "30 8 * * mon-fri", "--timezone", "Europe/Berlin"]) == 0
    assert main([*add, "--every", "1h"]) == 1  # same name
    assert main([*base, "add", "--name", "bad", "--prompt", "p", "--cron", "61 * * * *"]) == 2
    assert main([*base, "add", "--name", "past", "--prompt", "p", "--at", "2001-01-01T00:00"]) == 2
    capsys.readouterr()
    assert main([*base, "list"]) == 0
    listed = capsys.readouterr().out
    assert "standup: cron 30 8 * * mon-fri (Europe/Berlin)" in listed
    assert main([*base, "remove", "standup"]) == 0
    assert main([*base, "remove", "standup"]) == 1
    capsys.readouterr()
    assert main([*base, "list"]) == 0
    assert capsys.readouterr().out == "No scheduled jobs.\n"


HEARTBEAT_EMPTY = """# Heartbeat checklist

<!-- Add items like:
- [ ] check the build
-->

- [x] already done
"""


async def test_heartbeat_with_nothing_open_makes_no_llm_call(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "HEARTBEAT.md").write_text(HEARTBEAT_EMPTY)
    settings = make_settings(
        data,
        fake_llm.base_url,
        agents={"workspace": workspace},
        heartbeat={"enabled": True, "interval_minutes": 30, "target": "memory:owner"},
        cron={"enabled": False},
    )
    clock = FakeClock()
    channel = MemoryChannel("memory")
    with capture_logs() as logs:
        async with running_daemon(settings, [channel], clock=clock):
            clock.advance(30 * 60)
            await eventually(lambda: any(e["event"] == "heartbeat_skipped" for e in logs))
            # An open item: the agent is asked; HEARTBEAT_OK stays quiet, anything else goes out.
            (workspace / "HEARTBEAT.md").write_text(HEARTBEAT_EMPTY + "- [ ] water the plants\n")
            fake_llm.push(Reply(content="HEARTBEAT_OK"), Reply(content="Water the plants!"))
            clock.advance(30 * 60)
            await eventually(lambda: any(e["event"] == "reply_suppressed" for e in logs))
            # Nothing changed since that run: the next beat makes no call either.
            clock.advance(30 * 60)
            await eventually(
                lambda: any(e.get("reason") == "nothing changed since the last run" for e in logs)
            )
            (workspace / "HEARTBEAT.md").write_text(
                HEARTBEAT_EMPTY + "- [ ] water the plants\n- [ ] feed the cat\n"
            )
            clock.advance(30 * 60)
            await channel.wait_for(1)
    skipped = [e for e in logs if e["event"] == "heartbeat_skipped"]
    assert skipped[0]["reason"] == "no open items in HEARTBEAT.md"
    assert len(fake_llm.chat_requests) == 2
    assert "water the plants" in fake_llm.chat_requests[0]["messages"][-1]["content"]
    assert [(s.target, s.text) for s in channel.sent] == [("owner", "Water the plants!")]


async def test_heartbeat_outside_active_hours_does_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "HEARTBEAT.md").write_text("- [ ] something\n")
    settings = make_settings(
        tmp_path / "data",
        fake_llm.base_url,
        agents={"workspace": workspace},
        heartbeat={
            "enabled": True,
            "interval_minutes": 60,
            "active_hours": "22:00-06:00",
            "timezone": "Asia/Tokyo",  # 12:00 UTC is 21:00 in Tokyo: just outside
            "target": "memory:owner",
        },
    )
    clock = FakeClock()
    async with running_daemon(settings, [MemoryChannel("memory")], clock=clock) as daemon:
        assert daemon.heartbeat is not None
        clock.advance(60 * 60)  # 22:00 in Tokyo: inside
        await eventually(lambda: len(fake_llm.chat_requests) == 1)
        await anyio.sleep(0.05)
    assert len(fake_llm.chat_requests) == 1


def _job_names(jobs: list[CronJob]) -> list[str]:
    return [job.name for job in jobs]


async def test_cron_tools_add_list_and_remove(tmp_path: Path) -> None:
    changed: list[bool] = []
    jobs = CronJobs(
        JobsFile(tmp_path), default_timezone="UTC", changed=lambda: changed.append(True)
    )
    context = CronToolContext(jobs, SessionId("matrix:!room:x"), default_target="matrix:!room:x")
    add, listing, remove = cron_tools(context)
    result = await add.execute({"name": "tea", "prompt": "tea time", "every": "2h"})
    assert "Scheduled" in result.content
    assert "to matrix:!room:x" in (await listing.execute({})).content
    with pytest.raises(ToolError, match="no job named 'coffee'"):
        await remove.execute({"name": "coffee"})
    assert (await remove.execute({"name": "tea"})).content == "Removed job 'tea'."
    assert (await listing.execute({})).content == "No scheduled jobs."
    assert changed == [True, True]


async def test_a_run_fired_before_a_crash_is_answered_after_restart(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A cron run that fired but was not answered (the daemon died) is on disk; the next
    start answers it once and forgets it. One already answered is only acknowledged."""
    from squidd.core.models import InboundKind
    from squidd.core.runs import PendingRun
    from squidd.store.handled import HandledFile
    from squidd.store.pending_runs import PendingRunsDir

    data = tmp_path / "data"
    runs = PendingRunsDir(data)
    await runs.put(
        PendingRun(
            InboundKind.CRON,
            "report@2026-01-01T08:00:00+00:00",
            "cron:report",
            "daily report",
            "memory:!room:example.org",
            subject="report",
        )
    )
    await runs.put(
        PendingRun(
            InboundKind.CRON,
            "report@2025-12-31T08:00:00+00:00",
            "cron:report",
            "old report",
            "memory:!room:example.org",
            subject="report",
        )
    )
    await HandledFile(data).add("cron", "report@2025-12-31T08:00:00+00:00")
    settings = make_settings(data, fake_llm.base_url)
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel], clock=FakeClock()) as daemon:
        await channel.wait_for(1)
        await eventually(lambda: daemon.router.stats()["in_flight"] == 0)
        await eventually(
            lambda: (
                not (data / "gateway" / "runs").exists()
                or not list((data / "gateway" / "runs").iterdir())
            )
        )
    assert [(s.target, s.text) for s in channel.sent] == [
        ("!room:example.org", "echo: daily report")
    ]
    assert len(fake_llm.chat_requests) == 1
    assert await runs.load() == []


async def test_fired_runs_are_recorded_until_answered(tmp_path: Path, fake_llm: FakeLLM) -> None:
    from squidd.store.pending_runs import PendingRunsDir

    data = tmp_path / "data"
    clock = FakeClock()
    job = make_job("ping", "ping", every="1m", timezone="UTC", target="memory:x", now=clock.now())
    await JobsFile(data).modify(lambda _: [job])
    seen: list[int] = []

    def slow(request: dict[str, object]) -> Reply:
        seen.append(1)
        return Reply(content="pong", delay=0.5)

    fake_llm.responder = slow
    channel = MemoryChannel("memory")
    async with running_daemon(make_settings(data, fake_llm.base_url), [channel], clock=clock):
        clock.advance(60)
        await eventually(lambda: bool(seen))
        pending = await PendingRunsDir(data).load()
        assert [run.source_id.split("@")[0] for run in pending] == ["ping"]
        await channel.wait_for(1)
        await eventually(lambda: not list((data / "gateway" / "runs").iterdir()))


class PoisonChannel(MemoryChannel):
    """Every reply to `target` fails with a defect (not a passing error); the tries counted."""

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name)
        self.poisoned = target
        self.tries = 0

    async def send(self, outbound: Outbound) -> None:
        if outbound.target == self.poisoned:
            self.tries += 1
            raise ValueError("cannot encode the reply")
        await super().send(outbound)


async def test_a_scheduled_run_that_fails_the_same_way_is_parked_not_fired_at_every_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Issue 19's rule for the runs the daemon makes itself: a cron run and a heartbeat (kept
    on disk before a restart, resumed at start) whose reply fails with a defect are tried
    `gateway.max_attempts` times, then parked and forgotten by the runs directory, so the
    next start neither fires them again nor asks the model again; the other run is answered."""
    data = tmp_path / "data"
    runs = PendingRunsDir(data)
    for kind, source, session, text in (
        (InboundKind.CRON, "report@2026-01-01T08:00:00+00:00", "cron:report", "report"),
        (InboundKind.HEARTBEAT, "heartbeat@2026-01-01T08:00:00+00:00", "heartbeat", "beat"),
    ):
        await runs.put(PendingRun(kind, source, session, text, "memory:!bad:example.org"))
    await runs.put(
        PendingRun(
            InboundKind.CRON, "tea@2026-01-01T08:00:00+00:00", "cron:tea", "tea", "memory:ok"
        )
    )
    settings = make_settings(data, fake_llm.base_url, gateway={"max_attempts": 3})
    channel = PoisonChannel("memory", "!bad:example.org")
    async with running_daemon(settings, [channel], clock=FakeClock()):
        await channel.wait_for(1)
        await eventually(lambda: len(ParkedDir(data).list_sync()) == 2)
        await eventually(lambda: not list((data / "gateway" / "runs").iterdir()))
    parked = sorted(ParkedDir(data).list_sync(), key=lambda item: item.channel)
    assert [(p.channel, p.loop, p.error, p.attempts) for p in parked] == [
        ("cron", "message", "ValueError", 3),
        ("heartbeat", "message", "ValueError", 3),
    ]
    assert [s.text for s in channel.sent] == ["echo: tea"]
    assert channel.tries == 6
    asked = len(fake_llm.chat_requests)

    again = PoisonChannel("memory", "!bad:example.org")
    async with running_daemon(settings, [again], clock=FakeClock()) as daemon:
        await eventually(lambda: daemon.router.stats()["in_flight"] == 0)
    assert again.tries == 0 and again.sent == []
    assert len(fake_llm.chat_requests) == asked
    assert len(ParkedDir(data).list_sync()) == 2
