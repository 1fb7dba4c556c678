"""`/model [name]`: show or choose this conversation's model among the configured ones.

A chosen model is strict: its turns ask that model only, and wait for it rather than switch
to another one silently. `/model chain` goes back to the configured chain (its first model,
falling over to the next ones).
"""

from __future__ import annotations

from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    conversations = call.host.conversations
    models = conversations.models
    listed = ", ".join(models)
    if not call.argument:
        chosen = await conversations.chose(call.conversation)
        current = chosen or f"{models[0]} (the chain)"
        more = " `/model chain` goes back to the chain." if len(models) > 1 else ""
        return f"Model: {current}. Configured: {listed}. `/model NAME` switches.{more}"
    if call.argument == CHAIN:
        await conversations.file.set_model(call.conversation, None)
        return f"This conversation follows the chain again: {listed}."
    if call.argument not in models:
        return f"No model named {call.argument!r} is configured. Choose one of: {listed}."
    only_one = len(models) == 1
    await conversations.file.set_model(call.conversation, None if only_one else call.argument)
    return f"Model for this conversation: {call.argument}."


CHAIN = "chain"


COMMAND = ChatCommand("model", "show or switch this conversation's model", _run)
