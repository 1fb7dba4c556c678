"""`squidd cron` beside a running daemon, through the one cron service: a job removed from
the command line is gone from the scheduler at once and never fired; `squidd cron run`
fires the job once through the daemon and leaves its schedule; without a daemon it is
refused with the reason."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from squidd.cli import main
from squidd.core.cron import make_job
from squidd.core.cron_service import NOT_RUNNING
from squidd.store.cron_jobs import JobsFile
from tests.support.clock import FakeClock
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import eventually, make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path, data: Path) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[storage]\ndata_dir = "{data}"\n')
    return cfg


async def _cli(cfg: Path, *argv: str) -> int:
    """`squidd cron ...` as the person runs it: its own process's work, off this loop."""
    return await anyio.to_thread.run_sync(main, ["--config", str(cfg), "cron", *argv])


async def test_a_job_removed_from_the_command_line_is_not_fired(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    clock = FakeClock()
    made = [
        make_job(n, f"{n} time", every="1h", timezone="UTC", target="memory:x", now=clock.now())
        for n in ("tea", "coffee")
    ]
    await JobsFile(data).modify(lambda _: made)
    # The scheduler would look at the file again only after 5 minutes: the command line
    # tells the daemon instead.
    settings = make_settings(data, fake_llm.base_url, cron={"poll_s": 300})
    channel = MemoryChannel("memory")
    cfg = _config(tmp_path, data)
    async with running_daemon(settings, [channel], clock=clock) as daemon:
        scheduler = daemon.scheduler
        assert scheduler is not None
        await eventually(lambda: len(scheduler.next_runs()) == 2)
        assert await _cli(cfg, "remove", "tea") == 0
        assert "Removed job 'tea'.\n" in capsys.readouterr().out
        await eventually(lambda: [j["name"] for j in scheduler.next_runs()] == ["coffee"])
        clock.advance(3600)
        await channel.wait_for(1)
        await eventually(lambda: daemon.router.stats()["in_flight"] == 0)
    assert [s.text for s in channel.sent] == ["echo: coffee time"]
    assert not any("tea time" in str(r["messages"]) for r in fake_llm.chat_requests)


async def test_run_now_from_the_command_line_fires_once_through_the_daemon(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    clock = FakeClock()
    job = make_job(
        "tea", "tea time", every="1h", timezone="UTC", target="memory:x", now=clock.now()
    )
    await JobsFile(data).modify(lambda _: [job])
    cfg = _config(tmp_path, data)
    assert await _cli(cfg, "run", "tea") == 1  # no daemon yet
    assert f"cron: {NOT_RUNNING}\n" in capsys.readouterr().err
    settings = make_settings(data, fake_llm.base_url)
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel], clock=clock) as daemon:
        assert await _cli(cfg, "run", "coffee") == 1
        assert "cron: no job named 'coffee'\n" in capsys.readouterr().err
        assert await _cli(cfg, "run", "tea") == 0
        assert "Job 'tea' runs now; its schedule is unchanged.\n" in capsys.readouterr().out
        await channel.wait_for(1)
        await eventually(lambda: daemon.router.stats()["in_flight"] == 0)
        assert await _cli(cfg, "pause", "tea") == 0
        assert await _cli(cfg, "resume", "tea") == 0
    assert [s.text for s in channel.sent] == ["echo: tea time"]
    assert sum("tea time" in str(r["messages"][-1]) for r in fake_llm.chat_requests) == 1
    assert await JobsFile(data).load() == [job]  # the schedule as it was, not paused
