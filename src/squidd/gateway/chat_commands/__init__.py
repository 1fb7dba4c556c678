"""Chat commands: a person's message that is `/name [argument]` is answered here, by the
command's module, without a model call.

Each command is one module beside this one (`new.py`, `stop.py`, `status.py`, `model.py`,
`usage.py`, `approvals.py`, `approve.py`, `always.py`, `deny.py`, `help.py`) holding its
`COMMAND`: its
name, its help line and its handler. `COMMANDS` is the explicit table; `/help` is built from
it, so a new command is one module and one line here. Only a channel's message from a sender
the channel let in (`InboundKind.MESSAGE`) can be a command: cron, heartbeat and sub-agent
runs never are. A text whose first word names no command (`/usr is full`, `/etc/hosts`) is
an ordinary message for the model, as it was before commands existed: the words are in
core/command_words.py, which every stage before the line asks too. A channel may say
where the command is read from (`Inbound.command`: a mail's subject or first line, a group
message without the bot's mention); else the text.

The approval answers `/approve ID`, `/always ID` and `/deny ID` are in the table so `/help`
lists them, but a well-formed one is taken before the session's queue by
gateway/approval_answers.py; the table's entries answer the rest (no id, no such question
waiting here) plainly instead of passing them to the model.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from squidd.core.command_words import parse
from squidd.core.models import Inbound, InboundKind
from squidd.gateway.chat_commands import (
    always,
    approvals,
    approve,
    deny,
    model,
    new,
    status,
    stop,
    usage,
)
from squidd.gateway.chat_commands import help as help_command
from squidd.gateway.chat_commands.base import ChatCommand, CommandCall, CommandHost

__all__ = ["COMMANDS", "ChatCommand", "ChatCommands", "CommandHost", "parse"]

log = structlog.get_logger()

COMMANDS: tuple[ChatCommand, ...] = (
    new.COMMAND,
    stop.COMMAND,
    status.COMMAND,
    model.COMMAND,
    usage.COMMAND,
    approvals.COMMAND,
    approve.COMMAND,
    always.COMMAND,
    deny.COMMAND,
    help_command.COMMAND,
)
"""The chat commands, in the order `/help` lists them."""


class ChatCommands:
    """Answers the messages that are chat commands."""

    def __init__(self, host: CommandHost, commands: Sequence[ChatCommand] = COMMANDS) -> None:
        self._host = host
        self._commands = tuple(commands)
        self._by_name = {command.name: command for command in self._commands}

    async def answer(self, inbound: Inbound) -> str | None:
        """The reply when `inbound` is a chat command; None when it is a turn for the model."""
        if inbound.kind is not InboundKind.MESSAGE:
            return None
        parsed = parse(inbound.command or inbound.text, self._by_name)
        if parsed is None:
            return None
        name, argument = parsed
        command = self._by_name[name]
        log.info("chat_command", command=name)
        return await command.run(CommandCall(inbound, argument, self._host, self._commands))
