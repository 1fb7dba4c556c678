"""P7: the input tokens of a first "hello" turn in a fresh session.

A fresh `squidd init` (config and workspace in a temporary home), the default tools and
the per-turn tools the daemon adds (memory, search_history, cron), and the real agent loop
and OpenAI adapter against a scripted provider (over `httpx2.MockTransport`) that reports
usage like a 4-characters-per-token model: prompt tokens = request body characters / 4.
Printed: the request's characters, how many of them are tool schemas, the reported input
tokens per channel (target <= 2,000), and which tools each channel was offered: schemas a
channel's policy does not allow are never sent.

    python bench/bench_p7_hello.py
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM

from squidd.commands.init import init_command
from squidd.config import load_settings
from squidd.core.models import SessionId
from squidd.gateway.runtime import build_runtime
from squidd.gateway.turn_tools import TurnScope, TurnTools
from squidd.log import configure_logging

TARGET = 2000


async def hello(config: Path, channel: str, target: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def provider(body: dict[str, Any]) -> Reply:
        chars = len(json.dumps(body, ensure_ascii=False))
        schemas = len(json.dumps(body.get("tools") or [], ensure_ascii=False))
        seen.update(
            chars=chars,
            schemas=schemas,
            tokens=chars // 4,
            tools=[t["function"]["name"] for t in body.get("tools") or []],
        )
        return Reply(content="Hello! How can I help?", usage=(chars // 4, 8, 0))

    mock = MockLLM()
    mock.default = None
    mock.script.append(provider)
    settings = load_settings(config)
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(mock.handler))
    runtime = build_runtime(settings, http_client=client)
    try:
        session = SessionId(f"{channel}:{target}")
        # As the daemon builds a turn's tools: memory, cron, spawn (sub-agents on by default).
        scope = TurnScope(session, channel, reply_to=f"{channel}:{target}")
        tools = TurnTools(runtime).for_turn(scope)
        await runtime.agent.run(session, "hello", channel, extra_tools=tools)
    finally:
        await runtime.aclose()
    return seen


async def main() -> None:
    configure_logging("error", "console", known_secrets=[])
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        os.environ.pop("STATE_DIRECTORY", None)
        config = Path(tmp) / "config.toml"
        with contextlib.redirect_stdout(io.StringIO()):
            assert init_command(config) == 0
        print("P7: first 'hello' turn, fresh session, default tools, `squidd init` workspace")
        for channel, target in (
            ("matrix", "!room:example.org"),
            ("email", "owner@example.org"),
            ("terminal", "local"),
        ):
            seen = await hello(config, channel, target)
            print(
                f"  {channel:<9} request {seen['chars']} chars ({seen['schemas']} tool schemas, "
                f"{len(seen['tools'])} tools): {seen['tokens']} input tokens "
                f"(target <= {TARGET}) {'ok' if seen['tokens'] <= TARGET else 'OVER'}"
            )
            print(f"  {'':<9} tools: {', '.join(seen['tools'])}")
        # The shell enabled: the default policy (tools.policy.default_deny) refuses it on
        # every channel no rule allows it on, so its schema is never sent there either.
        os.environ["SQUIDD_TOOLS__SHELL__ENABLED"] = "true"
        try:
            seen = await hello(config, "email", "fresh@example.org")
        finally:
            del os.environ["SQUIDD_TOOLS__SHELL__ENABLED"]
        sent = "sent" if "shell" in seen["tools"] else "not sent"
        print(
            f"  email with the shell enabled but not allowed: {seen['tokens']} input tokens, "
            f"shell schema {sent}"
        )


if __name__ == "__main__":
    anyio.run(main)
