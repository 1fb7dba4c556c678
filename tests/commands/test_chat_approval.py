"""`squidd chat` at a real terminal (a pseudo-terminal): the shell call is asked about as
`Run shell: <command>? [y/N]`; `y` runs it once, `n` never; both decisions are in the audit
log with the terminal as who decided."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from squidd.store.audit import AuditFile
from tests.support.config import data_dir_config
from tests.support.fake_llm import FakeLLM, Reply

COMMAND = "echo ran >> ran.txt"


class Terminal:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> None:
        """Read until `text` was shown (a bound for a broken run, not a speed assertion)."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never shown: {text!r}; shown: {self.seen!r}"
            ready, _, _ = select.select([self.master], [], [], min(left, 1.0))
            if ready:
                try:
                    self.seen += os.read(self.master, 4096).decode("utf-8", "replace")
                except OSError:  # the child closed the terminal
                    break
        assert text in self.seen, self.seen

    def type(self, line: str) -> None:
        os.write(self.master, f"{line}\n".encode())

    def close(self) -> int:
        try:
            return self.process.wait(timeout=30)
        finally:
            os.close(self.master)


def test_y_runs_the_command_once_and_n_never(tmp_path: Path, fake_llm: FakeLLM) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = data_dir_config(
        tmp_path,
        agents={"workspace": str(workspace)},
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"rules": [{"channel": "terminal", "allow": ["shell"]}]},
        },
    )
    shell = Reply(tool_calls=[("shell", {"command": COMMAND})])
    fake_llm.push(shell, "Done.", shell, "Not done.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUIDD_")}
    env.update(
        {
            "HOME": str(tmp_path / "home"),
            "SQUIDD_LLM__BASE_URL": fake_llm.base_url,
            "SQUIDD_LLM__API_KEY": "sk-test-chat-approval-0001",
            "SQUIDD_LLM__MAX_RETRIES": "0",
        }
    )
    term = Terminal([sys.executable, "-m", "squidd", "--config", str(config), "chat"], env)
    try:
        term.expect("you> ")
        term.type("run it")
        term.expect(f"Run shell: {COMMAND}? [y/N] ")
        term.type("y")
        term.expect("Done.")
        assert (workspace / "ran.txt").read_text() == "ran\n"
        term.seen = ""
        term.type("again")
        term.expect(f"Run shell: {COMMAND}? [y/N] ")
        term.type("n")
        term.expect("Not done.")
        term.type("/exit")
    finally:
        assert term.close() == 0
    assert (workspace / "ran.txt").read_text() == "ran\n"
    records = AuditFile(tmp_path / "data").records()
    assert [(r["decision"], r["by"]) for r in records] == [
        ("approved", "terminal"),
        ("denied", "terminal"),
    ]
