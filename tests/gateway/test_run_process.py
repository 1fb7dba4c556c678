"""`squidd run` as a real process: sd_notify readiness, `squidd status`, SIGTERM, and a
SIGKILL in the middle of a turn. Messages go in and replies come out through the test-only
spool channel (tests/support/spool_channel.py), handed to the builder by the test launcher
(tests/support/run_with_channel.py)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.config import write_config, write_daemon_config
from tests.support.daemon import REPO, run_squidd
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_daemon import (
    Daemon,
    ask,
    drop_message,
    replies,
    spool_config,
    start_ready,
    wait_until,
)


def test_ready_status_and_sigterm(tmp_path: Path, fake_llm: FakeLLM, daemons: list[Daemon]) -> None:
    config = spool_config(tmp_path, fake_llm.base_url)
    data = tmp_path / "data"
    assert "not running" in run_squidd(config, "status").stderr
    daemon = Daemon(tmp_path, config, WATCHDOG_USEC="400000")
    daemons.append(daemon)
    messages = daemon.wait_for_notify("READY=1")
    assert any("STATUS=" in m for m in messages)
    daemon.wait_for_notify("WATCHDOG=1")

    ask(data, "m1", "hello daemon")
    assert replies(data, "m1")[0]["text"] == "echo: hello daemon"
    wait_until(lambda: (data / "spool" / "done" / "m1.json").exists())

    status = run_squidd(config, "status")
    print(status.stdout)
    assert status.returncode == 0, status.stderr
    assert "spool" in status.stdout and "connected" in status.stdout
    assert "last in" in status.stdout
    assert oct((data / "squidd.sock").stat().st_mode & 0o777) == "0o600"

    second = run_squidd(config, "run")  # one daemon per data dir
    assert second.returncode == 1
    assert "another squidd daemon answers" in second.stderr

    daemon.proc.send_signal(signal.SIGHUP)  # re-read the prompt files, keep running
    wait_until(lambda: "prompt_reload_requested" in daemon.log_text())
    assert daemon.proc.poll() is None

    assert daemon.terminate() == 0
    daemon.wait_for_notify("STOPPING=1")
    assert not (data / "squidd.sock").exists()
    assert "not running" in run_squidd(config, "status").stderr


def test_sigterm_lets_the_turn_in_flight_finish(
    tmp_path: Path, fake_llm: FakeLLM, daemons: list[Daemon]
) -> None:
    config = spool_config(tmp_path, fake_llm.base_url)
    data = tmp_path / "data"
    fake_llm.push(Reply(content="worth the wait", delay=1.5))
    daemon = start_ready(tmp_path, config, daemons)
    drop_message(data, "slow", "take your time")
    wait_until(lambda: len(fake_llm.chat_requests) == 1)
    assert daemon.terminate() == 0
    assert [r["text"] for r in replies(data, "slow")] == ["worth the wait"]
    assert (data / "spool" / "done" / "slow.json").exists()


def test_sigkill_mid_turn_is_answered_exactly_once_after_restart(
    tmp_path: Path, fake_llm: FakeLLM, daemons: list[Daemon]
) -> None:
    config = spool_config(tmp_path, fake_llm.base_url)
    data = tmp_path / "data"
    fake_llm.push(Reply(content="never delivered", delay=3))
    first = start_ready(tmp_path, config, daemons)
    drop_message(data, "k1", "answer me once")
    wait_until(lambda: len(fake_llm.chat_requests) == 1)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    assert replies(data, "k1") == []
    assert (data / "spool" / "in" / "k1.json").exists()  # not acknowledged

    second = start_ready(tmp_path, config, daemons)
    wait_until(lambda: (data / "spool" / "done" / "k1.json").exists())
    # A third start must not answer it again either.
    assert second.terminate() == 0
    start_ready(tmp_path, config, daemons)
    ask(data, "k2", "a later message")
    sent = replies(data, "k1")
    assert [r["text"] for r in sent] == ["echo: answer me once"]


def test_bad_config_exits_2_before_starting(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    # Channels are no config key: they are handed to the builder.
    write_config(config, {"gateway": {"extra_channels": ["no.such.module:create_channel"]}})
    result = run_squidd(config, "run")
    assert result.returncode == 2
    assert "extra_channels" in result.stderr
    write_config(config, {"gateway": {"max_concurrent_turns": 0}})
    assert run_squidd(config, "run").returncode == 2


def test_a_configured_workspace_that_does_not_exist_is_made_and_the_shell_runs_in_it(
    tmp_path: Path, fake_llm: FakeLLM, daemons: list[Daemon]
) -> None:
    workspace = tmp_path / "not" / "yet" / "workspace"
    config = write_daemon_config(
        tmp_path,
        fake_llm.base_url,
        api_key="sk-test-run-process-key-1234",
        agents={"workspace": str(workspace)},
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"default_deny": []},
            "tools.approval": {"tools": []},
        },
    )
    fake_llm.push(Reply(tool_calls=[("shell", {"command": "pwd"})]), "done")
    start_ready(tmp_path, config, daemons)
    assert workspace.is_dir()
    ask(tmp_path / "data", "w1", "where are you?")
    [tool_result] = [
        m["content"] for m in fake_llm.chat_requests[-1]["messages"] if m["role"] == "tool"
    ]
    assert tool_result.startswith("exit code 0"), tool_result
    assert str(workspace) in tool_result


def test_a_workspace_that_cannot_be_made_refuses_the_start_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    workspace = tmp_path / "a-file" / "workspace"
    config = write_daemon_config(
        tmp_path, "http://127.0.0.1:9/v1", api_key="sk-test", agents={"workspace": str(workspace)}
    )
    result = run_squidd(config, "run")
    assert result.returncode == 2
    assert f"agents.workspace: cannot create the workspace {workspace}" in result.stderr


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    tool = "/usr/bin/systemd-analyze"
    if not Path(tool).exists():
        pytest.skip("systemd-analyze is not installed (Debian package: systemd)")
    unit = REPO / "systemd" / "squidd.service"
    # `verify` checks that ExecStart exists: point it at a stand-in executable.
    fake_bin = tmp_path / "opt" / "squidd" / "bin"
    fake_bin.mkdir(parents=True)
    text = unit.read_text().replace("/opt/squidd/bin/squidd", str(fake_bin / "squidd"))
    (fake_bin / "squidd").write_text("#!/bin/sh\n")
    (fake_bin / "squidd").chmod(0o755)
    copy = tmp_path / "squidd.service"
    copy.write_text(text)
    result = subprocess.run(
        [tool, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.strip() == "", result.stderr


def test_usage_and_daily_cap_of_a_running_daemon(
    tmp_path: Path, fake_llm: FakeLLM, daemons: list[Daemon]
) -> None:
    """The scripted server reports usage; the child records it, refuses the turn over the
    daily cap without a model call, and `squidd status` and `squidd usage` show it."""
    config = write_daemon_config(
        tmp_path,
        fake_llm.base_url,
        api_key="sk-test-run-process-key-1234",
        limits={"daily_tokens": 1000, "refusal_text": "Budget used up for today."},
    )
    data = tmp_path / "data"
    fake_llm.push(Reply(content="costly answer", usage=(990, 30, 500)))
    daemon = start_ready(tmp_path, config, daemons)
    ask(data, "u1", "first")
    drop_message(data, "u2", "second")
    wait_until(lambda: replies(data, "u2"))
    assert replies(data, "u2")[0]["text"] == "Budget used up for today."
    assert len(fake_llm.chat_requests) == 1

    status = run_squidd(config, "status")
    assert "1020 tokens (990 input, 500 cached, 30 output) in 1 calls" in status.stdout
    assert "limit daily_tokens: 1020 of 1000 today - REACHED" in status.stdout
    usage = run_squidd(config, "usage")
    assert usage.returncode == 0, usage.stderr
    first, _, session = usage.stdout.splitlines()[:3]
    assert first.startswith("today") and "total       1020" in first
    assert session.split()[0] == "spool-s1"
    assert daemon.terminate() == 0
