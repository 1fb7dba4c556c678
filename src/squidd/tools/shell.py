"""The `shell` tool: run a command in the workspace. Off unless `[tools.shell] enabled`.

Each command starts in a new session (its own process group). When the timeout passes,
the turn is cancelled, or the command ends leaving background children behind, the whole
group is killed with SIGKILL, so nothing it started lingers. (A program that deliberately
calls setsid() leaves the group; that is beyond what a process group can hold.)

The command sees a small environment built from scratch (PATH, HOME, locale, ...), never
the daemon's own: no `SQUIDD_*` variables, no credentials directory, no notify socket.
Values equal to a configured secret are scrubbed from that environment and from the output.
Output (stdout and stderr merged) is capped; the beginning and the end are kept.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog
from pydantic import Field

from squidd.config.tools import ShellSettings
from squidd.core.journal import Effect
from squidd.core.models import ToolResult
from squidd.errors import ToolError
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared

log = structlog.get_logger()

_SAFE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_MAX_COMMAND_CHARS = 8192
_DRAIN_GRACE_S = 2.0
_REDACTED = "[redacted]"


class _CappedOutput:
    """Keeps the first and the last bytes of a stream, counting what it dropped between."""

    def __init__(self, limit: int) -> None:
        self._head_cap = limit // 2
        self._tail_cap = limit - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > self._tail_cap:
                del self._tail[: len(self._tail) - self._tail_cap]

    def render(self) -> str:
        omitted = self.total - len(self._head) - len(self._tail)
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if omitted > 0:
            return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}"
        return head + tail


def _kill_group(pgid: int) -> None:
    # ProcessLookupError: the group is already gone.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def command_environment(
    workspace: Path,
    passthrough: Sequence[str] = (),
    *,
    source: Mapping[str, str] | None = None,
    known_secrets: Sequence[str] = (),
) -> dict[str, str]:
    """The environment a command gets: an allow-list, never the daemon's environment."""
    origin = os.environ if source is None else source
    secrets = [s for s in known_secrets if len(s) >= 4]
    env: dict[str, str] = {}
    for name in (*_SAFE_ENV, *passthrough):
        value = origin.get(name)
        if value is None or name.upper().startswith("SQUIDD_"):
            continue
        if any(secret in value for secret in secrets):
            continue
        env[name] = value
    env.setdefault("PATH", _DEFAULT_PATH)
    env.update({"PWD": str(workspace), "TERM": "dumb", "PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"})
    return env


class ShellArguments(Arguments):
    command: str = Field(description="the command line to run")


class ShellTool(Declared[ShellArguments], name="shell", effect=Effect.SIDE_EFFECT):
    """Implements `squidd.core.ports.Tool`."""

    def __init__(
        self,
        workspace: Path,
        settings: ShellSettings,
        *,
        known_secrets: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._workspace = workspace
        self._settings = settings
        self._secrets = sorted({s for s in known_secrets if len(s) >= 4}, key=len, reverse=True)
        self._environ = environ

    @property
    def description(self) -> str:
        text = (
            "Run a command in the workspace directory and return its exit code and output "
            f"(stdout and stderr, capped). Killed after {self._settings.timeout_s:g} s."
        )
        if self._settings.allow:
            text += (
                " No shell is involved (no pipes, globs or redirections); the first word must "
                f"be one of: {', '.join(self._settings.allow)}."
            )
        return text

    def argv_for(self, command: str) -> list[str]:
        """The argv to run, or a `ToolError` when the allow/deny lists refuse the command."""
        if not command.strip():
            raise ToolError("command must not be empty")
        if len(command) > _MAX_COMMAND_CHARS:
            raise ToolError(f"command is longer than {_MAX_COMMAND_CHARS} characters")
        if "\x00" in command:
            raise ToolError("command must not contain NUL characters")
        try:
            lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(lexer)
        except ValueError as exc:
            raise ToolError(f"cannot parse the command: {exc}") from None
        deny = set(self._settings.deny)
        for word in words:
            if word in deny or os.path.basename(word) in deny:
                raise ToolError(f"refused: {os.path.basename(word)!r} is on the shell deny list")
        joined = " ".join(words)
        for entry in deny:
            if " " in entry and entry in joined:
                raise ToolError(f"refused: {entry!r} is on the shell deny list")
        if not self._settings.allow:
            return ["/bin/sh", "-c", command]
        argv = shlex.split(command)
        if argv[0] not in self._settings.allow:
            raise ToolError(
                f"refused: {argv[0]!r} is not on the shell allow list "
                f"({', '.join(self._settings.allow)})"
            )
        return argv

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _REDACTED)
        return text

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            command = self.parse(arguments).command
            argv = self.argv_for(command)
        except ToolError as exc:
            log.info("tool_refused", tool=self.name, reason=str(exc))
            return ToolResult(str(exc), is_error=True)
        env = command_environment(
            self._workspace,
            self._settings.env_passthrough,
            source=self._environ,
            known_secrets=self._secrets,
        )
        try:
            code, timed_out, output = await self._run(argv, env)
        except OSError as exc:
            if not self._workspace.is_dir():  # the working directory, not the command
                log.warning("shell_workspace_missing", workspace=str(self._workspace))
                return ToolResult(
                    f"could not start the command: the workspace {self._workspace} "
                    "does not exist (squidd run creates it at start)",
                    is_error=True,
                )
            return ToolResult(f"could not start the command: {exc.strerror}", is_error=True)
        text = self._scrub(output.render())
        log.info(
            "shell_command_done",
            exit_code=code,
            timed_out=timed_out,
            output_bytes=output.total,
        )
        if timed_out:
            return ToolResult(
                f"timed out after {self._settings.timeout_s:g} s; the command and every "
                f"process it started were killed.\noutput so far:\n{text}",
                is_error=True,
            )
        return ToolResult(f"exit code {code}\n{text}" if text else f"exit code {code}")

    async def _run(
        self, argv: list[str], env: dict[str, str]
    ) -> tuple[int | None, bool, _CappedOutput]:
        output = _CappedOutput(self._settings.max_output_bytes)
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self._workspace,
            env=env,
            start_new_session=True,
        )
        pgid = process.pid  # a new session: the leader's pid is the group id
        log.info("shell_command_started", pid=pgid)
        drained = anyio.Event()

        async def drain(stream: anyio.abc.ByteReceiveStream) -> None:
            try:
                async for chunk in stream:
                    output.add(chunk)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                drained.set()

        try:
            with anyio.move_on_after(self._settings.timeout_s) as deadline:
                async with anyio.create_task_group() as tg:
                    assert process.stdout is not None  # noqa: S101 - requested PIPE above
                    tg.start_soon(drain, process.stdout)
                    await process.wait()
                    # Background children would hold the pipe open; the command is over.
                    _kill_group(pgid)
                    with anyio.move_on_after(_DRAIN_GRACE_S):
                        await drained.wait()
                    tg.cancel_scope.cancel()
        finally:
            _kill_group(pgid)
            with anyio.CancelScope(shield=True):
                await process.aclose()
        return process.returncode, deadline.cancelled_caught, output
