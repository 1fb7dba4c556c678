"""The CPU of one model call on squidd's side: `EndpointClient.stream` (llm/openai.py)
against the scripted OpenAI-compatible server (tests/support/fake_llm.py) at latency 0.

The server runs in a child process (in a thread here it would compete for the GIL), so the
figure is this process's CPU time: what the daemon pays per call for the request's
encoding, the HTTP exchange, the SSE decoding and the chunks' reading. Each call
sends a prompt of a real turn's shape (a system prompt, twenty messages, eight tool
schemas) and streams a 205-character answer (`--chars` fewer: P3's echo is about 20) in
7-character pieces with a usage chunk.
Calls run one at a time (c=1) and then fifty at once (c=50), on one client (its own
connection pool, as each provider has).

`python bench/bench_llm_call.py [--calls N]` prints µs of CPU per call and what the first
call costs (CPU and resident memory: the imports and the client's construction it pays).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.fake_llm import FakeLLM, Reply

from squidd.core.models import Message, ToolDefinition
from squidd.llm.openai import (
    EndpointClient,
    RequestOptions,
    to_openai_message,
    to_openai_tool,
)

ANSWER = "The quick brown fox jumps over the lazy dog. " * 4 + "Done."


def _prompt() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    messages = [Message(role="system", content="You are a helpful assistant. " * 60)]
    for i in range(10):
        messages.append(Message(role="user", content=f"Question {i}: " + "words " * 30))
        messages.append(Message(role="assistant", content=f"Answer {i}: " + "reply " * 40))
    tools = [
        ToolDefinition(
            f"tool_{i}",
            "A tool that does one thing well. " * 3,
            {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        )
        for i in range(8)
    ]
    return [to_openai_message(m) for m in messages], [to_openai_tool(t) for t in tools]


async def _call(client: EndpointClient, messages: Any, tools: Any) -> None:
    events = [e async for e in client.stream("fake-model", messages, tools, RequestOptions())]
    if len(events) < 2:
        raise SystemExit(f"unexpected answer: {events!r}")


async def _measure(base_url: str, calls: int) -> dict[str, float]:
    messages, tools = _prompt()
    client = EndpointClient(base_url, "sk-bench", timeout_s=30, connect_timeout_s=5)
    rss, first = _rss_kib(), time.process_time()
    await _call(client, messages, tools)
    first_cpu = time.process_time() - first
    first_rss = _rss_kib() - rss
    for _ in range(20):  # warm-up: connections in the pool, caches filled
        await _call(client, messages, tools)
    start = time.process_time()
    for _ in range(calls):
        await _call(client, messages, tools)
    c1 = (time.process_time() - start) / calls
    rounds = max(1, calls // 50)
    start = time.process_time()
    for _ in range(rounds):
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(_call, client, messages, tools)
    c50 = (time.process_time() - start) / (rounds * 50)
    await client.aclose()
    return {"first": first_cpu, "first_rss": first_rss, "c1": c1, "c50": c50}


def _rss_kib() -> float:
    """This process's resident set (VmRSS), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1])
    return 0.0


def _serve(chars: int) -> None:
    """The scripted server, until stdin closes (the parent went away)."""

    def answer(_: dict[str, Any]) -> Reply:
        return Reply(content=ANSWER[:chars], usage=(900, 60, 0))

    with FakeLLM(responder=answer) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--chars", type=int, default=len(ANSWER), help="the answer's length")
    parser.add_argument("--serve", action="store_true", help="run the scripted server")
    args = parser.parse_args()

    if args.serve:
        _serve(args.chars)
        return
    server = subprocess.Popen(  # noqa: S603 - our own interpreter and argv
        [sys.executable, __file__, "--serve", "--chars", str(args.chars)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().decode().strip()
        figures = anyio.run(_measure, base_url, args.calls)
    finally:
        server.kill()  # the child this run started, by its own handle
        server.wait()
    load = os.getloadavg()[0]
    print(
        f"one model call ({args.chars} characters), CPU on squidd's side: "
        f"c=1 {figures['c1'] * 1e6:.0f} µs, "
        f"c=50 {figures['c50'] * 1e6:.0f} µs per call; first call "
        f"{figures['first'] * 1e3:.0f} ms and +{figures['first_rss'] / 1024:.1f} MiB "
        f"(load {load:.2f})"
    )


if __name__ == "__main__":
    main()
