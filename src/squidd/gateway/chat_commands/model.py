"""`/model [name]`: show or choose this conversation's model among the configured ones."""

from __future__ import annotations

from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    conversations = call.host.conversations
    models = conversations.models
    listed = ", ".join(models)
    if not call.argument:
        current = await conversations.model(call.conversation)
        return f"Model: {current}. Configured: {listed}. `/model NAME` switches."
    if call.argument not in models:
        return f"No model named {call.argument!r} is configured. Choose one of: {listed}."
    chosen = None if call.argument == models[0] else call.argument
    await conversations.file.set_model(call.conversation, chosen)
    return f"Model for this conversation: {call.argument}."


COMMAND = ChatCommand("model", "show or switch this conversation's model", _run)
