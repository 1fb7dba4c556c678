"""Chat commands: `/help` and `/usage` from a person on a channel are answered by their own
modules without a model call and acknowledged like any reply; `/help` lists the table; text
that names no command, and runs made by the gateway, still go to the model."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from squidd.core.command_words import ANSWERED, APPROVAL, KNOWN
from squidd.core.models import Inbound, InboundKind, SessionId
from squidd.gateway.chat_commands import COMMANDS, ChatCommand, ChatCommands, parse
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


class _Host:
    async def usage_today(self) -> Mapping[str, Any]:
        return {
            "day": "2026-11-25",
            "total_tokens": 1055,
            "prompt_tokens": 1000,
            "completion_tokens": 55,
            "calls": 2,
            "cost": 0.0025,
        }

    def model_state(self) -> Mapping[str, Any]:
        return {}

    def approvals(self) -> None:
        return None


def _inbound(text: str, kind: InboundKind = InboundKind.MESSAGE) -> Inbound:
    return Inbound("memory", "id-1", SessionId("s1"), "alice", text, kind=kind)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/help", ("help", "")),
        ("  /Usage  ", ("usage", "")),
        ("/model gpt-x fast", ("model", "gpt-x fast")),
        ("/etc/hosts holds what?", None),
        ("/ 2", None),
        ("hello /help", None),
        ("", None),
    ],
)
def test_parse(text: str, parsed: tuple[str, str] | None) -> None:
    assert parse(text) == parsed


async def test_help_lists_every_command_of_the_table_with_its_help() -> None:
    reply = await ChatCommands(_Host()).answer(_inbound("/help"))
    assert reply is not None
    for command in COMMANDS:
        assert f"/{command.name} - {command.help}" in reply


async def test_a_command_added_to_the_table_is_run_and_listed() -> None:
    seen: list[str] = []

    async def echo(call: Any) -> str:
        seen.append(call.argument)
        return f"echo {call.argument}"

    table = (*COMMANDS, ChatCommand("echo", "says it back", echo))
    commands = ChatCommands(_Host(), table)
    assert await commands.answer(_inbound("/echo two words")) == "echo two words"
    assert seen == ["two words"]
    help_text = await commands.answer(_inbound("/help"))
    assert help_text is not None and "/echo - says it back" in help_text


async def test_usage_says_todays_figures() -> None:
    reply = await ChatCommands(_Host()).answer(_inbound("/usage"))
    assert reply == (
        "Usage today (2026-11-25): 1055 tokens (1000 input, 55 output) in 2 model calls, "
        "cost 0.0025."
    )


async def test_unknown_words_and_gateway_runs_are_not_commands() -> None:
    commands = ChatCommands(_Host())
    assert await commands.answer(_inbound("/usr is full, what now?")) is None
    assert await commands.answer(_inbound("what is /help?")) is None
    for kind in (InboundKind.CRON, InboundKind.HEARTBEAT, InboundKind.SUBAGENT):
        assert await commands.answer(_inbound("/help", kind)) is None


async def test_the_daemon_answers_a_command_without_a_model_call(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    fake_llm.push(Reply(content="a model answer", usage=(40, 2, 0)))
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]):
        channel.inject("/help", session="s1", sender="alice", source_id="m1")
        await channel.wait_for(1, what="acked")
        channel.inject("/usr is full", session="s1", sender="alice", source_id="m2")
        await channel.wait_for(2, what="acked")
        channel.inject("/usage", session="s1", sender="alice", source_id="m3")
        await channel.wait_for(3, what="acked")
    texts = [sent.text for sent in channel.sent]
    assert texts[0].startswith("Commands:\n") and "\n/help - " in texts[0]
    assert "\n/usage - " in texts[0] and "\n/new - " in texts[0]
    assert texts[1] == "a model answer"
    assert "42 tokens" in texts[2] and "in 1 model call" in texts[2]
    assert len(fake_llm.chat_requests) == 1


def test_the_command_words_are_the_table_s_and_the_approval_answers() -> None:
    # Every stage before the line asks core/command_words.py what is a command: its words
    # must be the table's (a command missing there would be merged into a burst).
    assert {command.name for command in COMMANDS} == KNOWN == ANSWERED | APPROVAL
    assert parse("/usr is full") is None and parse("/etc/hosts") is None
    assert parse("/HELP") == ("help", "") and parse("/approve 0badc0de") == ("approve", "0badc0de")
