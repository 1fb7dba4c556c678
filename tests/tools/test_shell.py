"""The shell tool: timeouts kill the whole process group, output caps, a clean environment,
and the allow/deny lists."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from squidd.config.tools import ShellSettings
from squidd.tools.shell import ShellTool

pytestmark = pytest.mark.anyio


def process_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "Z" in state.split()[1]


def wait_gone(pid: int) -> bool:
    # SIGKILL is delivered asynchronously; give the kernel a moment, not a speed requirement.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.05)
    return False


def read_pids(workspace: Path, *names: str) -> list[int]:
    return [int((workspace / name).read_text().strip()) for name in names]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def shell(workspace: Path, **settings: object) -> ShellTool:
    return ShellTool(workspace, ShellSettings(enabled=True, **settings))  # type: ignore[arg-type]


SPAWNER = (
    "sleep 300 & echo $! > child.pid; "
    "sh -c 'sleep 300 & echo $! > grandchild.pid; wait' & "
    "echo $$ > leader.pid; "
    "until [ -s child.pid ] && [ -s grandchild.pid ]; do sleep 0.05; done; "
)


async def test_timeout_kills_the_command_and_its_children(workspace: Path) -> None:
    result = await shell(workspace, timeout_s=2).execute({"command": SPAWNER + "sleep 300"})
    assert result.is_error
    assert "timed out after 2 s" in result.content
    pids = read_pids(workspace, "leader.pid", "child.pid", "grandchild.pid")
    for pid in pids:
        assert wait_gone(pid), f"process {pid} is still running"


async def test_children_left_behind_by_a_finished_command_are_killed(workspace: Path) -> None:
    result = await shell(workspace, timeout_s=60).execute({"command": SPAWNER + "echo done"})
    assert not result.is_error
    assert result.content == "exit code 0\ndone\n"
    for pid in read_pids(workspace, "leader.pid", "child.pid", "grandchild.pid"):
        assert wait_gone(pid), f"process {pid} is still running"


async def test_cancelled_turn_kills_the_process_group(workspace: Path) -> None:
    tool = shell(workspace, timeout_s=600)
    with anyio.move_on_after(2):
        await tool.execute({"command": SPAWNER + "sleep 300"})
    for pid in read_pids(workspace, "leader.pid", "child.pid", "grandchild.pid"):
        assert wait_gone(pid), f"process {pid} is still running"


async def test_exit_code_and_merged_output(workspace: Path) -> None:
    result = await shell(workspace).execute({"command": "echo out; echo err >&2; pwd; exit 3"})
    assert not result.is_error
    assert result.content == f"exit code 3\nout\nerr\n{os.path.realpath(workspace)}\n"


async def test_output_keeps_head_and_tail(workspace: Path) -> None:
    command = "seq 1 100000"
    result = await shell(workspace, max_output_bytes=1000).execute({"command": command})
    lines = result.content.splitlines()
    assert lines[:3] == ["exit code 0", "1", "2"]
    assert lines[-1] == "100000"
    assert any("bytes omitted" in line for line in lines)
    assert len(result.content) < 1200


async def test_environment_carries_no_daemon_secrets(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQUIDD_LLM__API_KEY", "sk-daemonsecret123")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", "/run/credentials/squidd.service")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-othersecret456")
    monkeypatch.setenv("LANG", "C.UTF-8")
    result = await shell(workspace).execute({"command": "env"})
    names = {line.split("=", 1)[0] for line in result.content.splitlines()[1:] if "=" in line}
    assert "PATH" in names
    assert "LANG" in names
    assert not names & {"SQUIDD_LLM__API_KEY", "CREDENTIALS_DIRECTORY", "NOTIFY_SOCKET"}
    assert "OPENAI_API_KEY" not in names
    assert "daemonsecret" not in result.content
    assert "othersecret" not in result.content


async def test_known_secrets_are_scrubbed_from_env_and_output(workspace: Path) -> None:
    tool = ShellTool(
        workspace,
        ShellSettings(enabled=True, env_passthrough=["EXTRA"]),
        known_secrets=["hunter2hunter2"],
        environ={"PATH": os.environ["PATH"], "EXTRA": "x-hunter2hunter2-x"},
    )
    result = await tool.execute(
        {"command": "echo token=hunter2hunter2; echo extra=${EXTRA:-unset}"}
    )
    assert result.content == "exit code 0\ntoken=[redacted]\nextra=unset\n"


@pytest.mark.parametrize(
    "command", ["sudo id", "ls; sudo id", "echo $(su -c id)", "true && /usr/bin/sudo id"]
)
async def test_deny_list(workspace: Path, command: str) -> None:
    result = await shell(workspace).execute({"command": f"{command}; touch ran"})
    assert result.is_error
    assert "is on the shell deny list" in result.content
    assert not (workspace / "ran").exists()


async def test_allow_list_runs_without_a_shell(workspace: Path) -> None:
    tool = shell(workspace, allow=["echo"])
    ok = await tool.execute({"command": "echo hi | touch ran"})
    assert ok.content == "exit code 0\nhi | touch ran\n"
    assert not (workspace / "ran").exists()
    for command in ("cat /etc/passwd", "./echo hi", "/bin/sh -c 'echo hi'"):
        refused = await tool.execute({"command": command})
        assert refused.is_error, command
        assert "is not on the shell allow list" in refused.content


@pytest.mark.parametrize("command", ["", "   ", "echo 'unclosed", "a" * 9000])
async def test_bad_commands(workspace: Path, command: str) -> None:
    result = await shell(workspace).execute({"command": command})
    assert result.is_error


async def test_a_missing_workspace_is_named_not_blamed_on_the_command(tmp_path: Path) -> None:
    gone = tmp_path / "no-such-workspace"
    result = await shell(gone).execute({"command": "echo hi"})
    assert result.is_error
    assert f"the workspace {gone} does not exist" in result.content
