"""What the R6 turn-journal scenarios share: the scripted model of a turn that runs one
shell command appending a line to a file, the kill points, and the checks.

A kill point names where in the turn the real daemon is SIGKILLed:
- `before_answer`: the model holds its first answer; killed while it waits;
- `after_answer`: killed by the daemon itself the moment the tool-asking answer is durable
  (the test hook of tests/support/crash_points.py, point "answer");
- `tool_running`: the command appended its line and sleeps; killed then;
- `after_result`: killed the moment the tool's result is durable (point "result");
- `final_answer`: the model holds its final answer; killed while it waits;
- `before_delivery`: killed by the daemon itself the moment the turn's reply is stored in
  the outbox, before the channel sends it (point "outbox"): the restart sends the stored reply.
`REQUESTS` is how many model requests the whole turn makes across the kill: a recorded
answer is never asked for again, an answer that was never given (or never recorded, like
the final one) is.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import Reply

DONE = "The line is in the file."
POINTS = [
    "before_answer",
    "after_answer",
    "tool_running",
    "after_result",
    "final_answer",
    "before_delivery",
]
REQUESTS = {
    "before_answer": 3,
    "after_answer": 2,
    "tool_running": 2,
    "after_result": 2,
    "final_answer": 3,
    "before_delivery": 2,
}
CRASH_AFTER = {"after_answer": "answer", "after_result": "result", "before_delivery": "outbox"}
SLOW = {"before_answer": 1, "final_answer": 2}


class Model:
    """The scripted model, answering by what the request holds: a request with this turn's
    tool result gets the final answer, any other asks for the shell call. `slow` holds the
    Nth request (1-based) until `release` is set."""

    def __init__(self, command: str, slow: int = 0) -> None:
        self.command = command
        self.slow = slow
        self.release = threading.Event()
        self.seen = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.seen += 1
            number = self.seen
        if number == self.slow:
            self.release.wait(120)
        messages = request["messages"]
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        if any(m["role"] == "tool" for m in messages[last_user:]):
            return Reply(content=DONE)
        return Reply(tool_calls=[("shell", {"command": self.command})])


def model_for(point: str, path: Path) -> Model:
    sleep = "; sleep 20" if point == "tool_running" else ""
    return Model(f"echo line >> {json.dumps(str(path))}{sleep}", slow=SLOW.get(point, 0))


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def shell_sections(channel: str) -> dict[str, dict[str, Any]]:
    """Config sections for a test config: the shell tool, allowed on `channel`, without
    asking for approval (the approval tests ask)."""
    return {
        "tools.shell": {"enabled": True, "timeout_s": 120},
        "tools.approval": {"tools": []},
        "tools.policy": {"rules": [{"channel": channel, "allow": ["shell"]}]},
    }


async def poll(check: Callable[[], bool], what: str, timeout: float = 90) -> None:
    """Wait on foreign state (a file, a process, the model's count); a bound for a broken
    run only, never a speed assertion."""
    try:
        with anyio.fail_after(timeout):
            while not check():  # noqa: ASYNC110 - polls foreign state with no event
                await anyio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def cut_at(
    point: str,
    model: Model,
    path: Path,
    start: Callable[[str], Awaitable[DaemonProcess]],
    send: Callable[[], Awaitable[None]],
) -> None:
    """Start squidd (with the crash setting the point needs), send the message, and SIGKILL
    squidd at `point`."""
    daemon = await start(CRASH_AFTER.get(point, ""))
    try:
        await send()
        if point in CRASH_AFTER:
            await poll(lambda: daemon.proc.poll() is not None, f"the crash {point}")
        elif point == "tool_running":
            await poll(lambda: lines(path) == ["line"], "the tool's effect")
        else:
            await poll(lambda: model.seen == model.slow, "the held request")
    finally:
        daemon.kill()
        model.release.set()


def history(data: Path, session: str) -> list[dict[str, Any]]:
    from squidd.store.jsonl import JsonlStore

    path = JsonlStore(data).history_path(session)
    found = []
    for raw in path.read_bytes().splitlines() if path.exists() else []:
        try:
            found.append(json.loads(raw))
        except ValueError:
            continue
    return found


def check_turn(point: str, path: Path, requests: list[dict[str, Any]], turn: list[Any]) -> None:
    """The acceptance after the restart: the line once, the model asked as often as the
    point allows, told when the call's outcome was unknown, the turn in the history once."""
    assert lines(path) == ["line"]
    assert len(requests) == REQUESTS[point]
    final = [str(m["content"]) for m in requests[-1]["messages"] if m["role"] == "tool"]
    if point == "tool_running":
        assert "interrupted" in final[-1] and "not known whether it took effect" in final[-1]
    else:
        assert final[-1].startswith("exit code 0")
    assert len([m for m in turn if m["role"] == "user" and m.get("turn")]) == 1
    finals = [m["content"] for m in turn if m["role"] == "assistant" and not m.get("tool_calls")]
    assert finals == [DONE]


def journals(data: Path) -> list[Path]:
    folder = data / "gateway" / "journal"
    return list(folder.glob("*.jsonl")) if folder.exists() else []
