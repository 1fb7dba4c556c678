"""A person at a terminal, for the interactive commands: the command runs on a pseudo-terminal
(the standard `pty` module), answers are typed when their question shows."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from pathlib import Path

from tests.support.daemon import daemon_env, squidd_argv

WAIT_S = 60.0  # a cap on waiting for a question, never an assertion on speed


class Terminal:
    def __init__(self, config: Path, *args: str, home: Path | None = None) -> None:
        """`home`: a fresh HOME for the command, as on a new machine."""
        argv = squidd_argv(config, *args)
        env = daemon_env(**({"HOME": str(home)} if home is not None else {}))
        pid, fd = pty.fork()
        if pid == 0:  # the child: the command, with the pty as its controlling terminal
            os.execve(argv[0], argv, env)  # noqa: S606 - our own CLI, no shell wanted
        self.pid, self.fd = pid, fd
        self.output = ""  # everything the command printed
        self._pos = 0  # where the next `expect` looks from
        self.code: int | None = None

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child closed the terminal
            return False
        if not data:
            return False
        self.output += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return True

    def expect(self, pattern: str) -> None:
        """Wait until `pattern` (a regex) appears in the output after the last match."""
        deadline = time.monotonic() + WAIT_S
        while (found := re.compile(pattern).search(self.output, self._pos)) is None:
            if time.monotonic() > deadline or not self._read(0.5):
                raise AssertionError(f"no {pattern!r} in:\n{self.output}")
        self._pos = found.end()

    def answer(self, pattern: str, text: str) -> None:
        self.expect(pattern)
        os.write(self.fd, text.encode() + b"\n")

    def _reading(self) -> bool:
        """Whether the command sleeps in its read of the terminal (Linux /proc)."""
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(f"/proc/{self.pid}/wchan").read_text().strip()
        except OSError:
            return True
        return state == "S" and wchan in ("wait_woken", "n_tty_read", "0", "")

    def interrupt(self) -> None:
        """Ctrl-C, as the terminal sends it, once the command waits for input: a SIGINT that
        lands between Python printing a prompt and starting its read is only seen at the next
        read (CPython checks signals when the read is interrupted), which a person typing
        never hits but a script would."""
        deadline = time.monotonic() + WAIT_S
        while not self._reading() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.write(self.fd, b"\x03")

    def wait(self) -> int:
        """Read to the end; the exit code."""
        deadline = time.monotonic() + WAIT_S * 3
        while self._read(0.5) and time.monotonic() < deadline:
            pass
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.code = os.waitstatus_to_exitcode(status)
        return self.code

    def kill(self) -> None:
        if self.code is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
