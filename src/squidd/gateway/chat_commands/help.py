"""`/help`: the chat commands and what each does, read from the table itself."""

from __future__ import annotations

from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    lines = [f"/{command.name} - {command.help}" for command in call.commands]
    return "Commands:\n" + "\n".join(lines) + "\nAnything else goes to the assistant."


COMMAND = ChatCommand("help", "the commands and what each does", _run)
