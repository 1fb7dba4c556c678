"""Driving a real `squidd run` process under load, for benchmarks (reusable by a runner).

`LoadedDaemon` starts the scripted OpenAI-compatible server (tests/support/fake_llm.py) on
127.0.0.1, writes a config whose only channel is the loopback load channel
(bench/load_channel.py), starts `squidd run` as a child process and connects to the channel.
`rounds()` sends one message to each of a set of sessions and waits until all of them are
acknowledged (replied, recorded as handled), so each session's turns run in order while
sessions run side by side. `rss_kib()` reads the child's resident set from /proc.

    with LoadedDaemon() as daemon:
        daemon.rounds(sessions=[...], count=10)
        print(daemon.rss_kib())

The child is stopped by its own PID (SIGTERM, then SIGKILL) and its data dir removed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.daemon import daemon_env, run_argv
from tests.support.fake_llm import FakeLLM, Reply, Responder, echo_responder

START_TIMEOUT_S = 60.0
TURN_TIMEOUT_S = 120.0
RECENT_PROMPTS = 100


def household_responder(request: dict[str, Any]) -> Reply:
    """A short answer to a turn, a short summary to a consolidation request.

    Echoing the consolidation prompt back (it quotes the history or the summary) would make
    each summary longer than the last, and a benchmark would measure a growing prompt
    instead of what the daemon keeps.
    """
    messages = request.get("messages") or [{}]
    system = str(messages[0].get("content") or "")
    if "memory consolidation assistant" in system:
        return Reply(content="The user asked about the weather several times; it was fine.")
    return echo_responder(request)


def prompt_tokens(request: dict[str, Any]) -> int:
    """A chat request's prompt tokens as a 4-characters-per-token tokenizer counts them:
    everything the provider bills as prompt, i.e. the messages' text, the tool calls' names
    and arguments, and the tool schemas."""
    messages = request.get("messages") or []
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    chars += sum(
        len(c["function"]["arguments"]) + len(c["function"]["name"])
        for m in messages
        for c in m.get("tool_calls") or ()
    )
    chars += len(json.dumps(request.get("tools") or []))
    return chars // 4


def reporting_usage(responder: Responder) -> Responder:
    """The responder's replies with the usage a provider reports at the end of a stream
    (prompt: `prompt_tokens`; completion: the reply's characters / 4). A real provider
    reports it on every call and the daemon records it (the usage ledger, the caps), so a
    memory benchmark that leaves it out measures less than a deployment keeps."""

    def respond(request: dict[str, Any]) -> Reply:
        reply = responder(request)
        if reply.usage is None:
            reply.usage = (prompt_tokens(request), max(1, len(reply.content) // 4), 0)
        return reply

    return respond


class QuietLLM(FakeLLM):
    """The scripted server without its request record (it would grow with every turn); it
    keeps only the sizes of the last turns' prompts (the messages' characters, and the whole
    prompt in tokens: `prompt_tokens`), to show they stay flat."""

    last_prompt_chars = 0
    turn_prompts = 0

    def __init__(self, responder: Responder) -> None:
        super().__init__(responder=responder)
        self.recent_prompt_chars: deque[int] = deque(maxlen=RECENT_PROMPTS)
        self.recent_prompt_tokens: deque[int] = deque(maxlen=RECENT_PROMPTS)

    def next_reply(self, request: dict[str, Any], key: str = "") -> Reply:
        messages = request.get("messages") or []
        if "memory consolidation" not in str(messages[0].get("content") if messages else ""):
            self.last_prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
            self.turn_prompts += 1
            self.recent_prompt_chars.append(self.last_prompt_chars)
            self.recent_prompt_tokens.append(prompt_tokens(request))
        return self.responder(request)


def rss_kib(pid: int) -> int:
    """VmRSS of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


LOAD_CHANNEL = "bench.load_channel:create_channel"


def write_config(
    root: Path,
    llm_url: str,
    *,
    log_level: str = "info",
    gateway: str = "",
    llm: str = "",
    tail: str = "",
) -> Path:
    """A config for the bench: the scripted model and a data dir under root; `gateway` adds
    lines to the [gateway] section; `llm`, when given, is the [llm] section's body instead
    of the one endpoint (`{url}` in it: the scripted model's URL). The load channel is
    handed to the builder (`run_argv`). `tail` goes at the end (more tables:
    `[[agents.list]]`)."""
    config = root / "config.toml"
    one_endpoint = f'base_url = "{llm_url}"\napi_key = "sk-bench-load-key-0000"\nmax_retries = 0'
    config.write_text(
        f"""
[llm]
{llm.replace("{url}", llm_url) if llm else one_endpoint}

[storage]
data_dir = "{root / "data"}"

[logging]
format = "json"
level = "{log_level}"

[gateway]
{gateway}
{tail}
"""
    )
    return config


class LoadedDaemon:
    """A `squidd run` child fed through the load channel, with its scripted model."""

    def __init__(
        self,
        *,
        log_level: str = "info",
        trace_frames: int = 0,
        keep_dir: bool = False,
        base_dir: str | None = None,
        gateway: str = "",
        responder: Responder | None = None,
        llm: str = "",
        tail: str = "",
    ) -> None:
        self._tail = tail
        self._gateway = gateway
        self._llm_section = llm
        self._log_level = log_level
        self._trace_frames = trace_frames
        self._keep = keep_dir
        self._base_dir = base_dir
        self.root = Path()
        self.llm = QuietLLM(responder=responder or household_responder)
        self.proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._next_id = 0
        self.turns = 0

    # --- life cycle ------------------------------------------------------------------------

    def __enter__(self) -> LoadedDaemon:
        self.root = Path(tempfile.mkdtemp(prefix="squidd-bench-", dir=self._base_dir))
        self.llm.start()
        config = write_config(
            self.root,
            self.llm.base_url,
            log_level=self._log_level,
            gateway=self._gateway,
            llm=self._llm_section,
            tail=self._tail,
        )
        extra = {"PYTHONTRACEMALLOC": str(self._trace_frames)} if self._trace_frames else {}
        self._log = (self.root / "daemon.log").open("wb")
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and argv
            run_argv(config, LOAD_CHANNEL),
            env=daemon_env(**extra),
            stdout=self._log,
            stderr=self._log,
        )
        try:
            self._connect()
        except BaseException:
            # A daemon that did not start in time is still running: stop it here, since
            # `with` calls __exit__ only once __enter__ has returned.
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sock is not None:
            self._sock.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log.close()
        self.llm.stop()
        if not self._keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def _connect(self) -> None:
        port_file = self.root / "data" / "load" / "port"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError("the load channel did not start:\n" + self.log_tail())
            time.sleep(0.05)
        port = int(port_file.read_text())
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=TURN_TIMEOUT_S)

    def _check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"squidd exited ({self.proc.returncode}):\n" + self.log_tail())

    def log_tail(self, chars: int = 3000) -> str:
        self._log.flush()
        return (self.root / "daemon.log").read_text(errors="replace")[-chars:]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    # --- traffic ---------------------------------------------------------------------------

    def _send(self, data: dict[str, Any]) -> None:
        assert self._sock is not None
        self._sock.sendall(json.dumps(data).encode() + b"\n")

    def _receive(self) -> dict[str, Any]:
        assert self._sock is not None
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                self._check_alive()
                raise RuntimeError("the load channel closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        result: dict[str, Any] = json.loads(line)
        return result

    def cpu_seconds(self) -> float:
        """User + system CPU time of the daemon process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def round(self, sessions: Sequence[str], text: str = "how is the weather") -> None:
        """One message to each session; returns when every one is acknowledged."""
        waiting: set[str] = set()
        for session in sessions:
            self._next_id += 1
            source_id = f"b{self._next_id}"
            waiting.add(source_id)
            self._send({"id": source_id, "session": session, "text": f"{text} #{self._next_id}"})
        while waiting:
            reply = self._receive()
            if "ack" in reply:
                waiting.discard(str(reply["ack"]))
        self.turns += len(sessions)

    def rounds(self, sessions: Sequence[str], count: int) -> None:
        for _ in range(count):
            self.round(sessions)

    def command(self, name: str) -> Any:
        """A load channel command without arguments (`gc`, `trim`); returns its answer."""
        self._send({"cmd": name})
        while True:
            reply = self._receive()
            if name in reply:
                return reply[name]

    def snapshot(self, path: Path) -> Path:
        """A tracemalloc snapshot of the daemon (started with `trace_frames`), dumped to path."""
        self._send({"cmd": "snapshot", "path": str(path)})
        while True:
            reply = self._receive()
            if "snapshot" in reply:
                if reply["snapshot"] is None:
                    raise RuntimeError(str(reply.get("error")))
                return path
