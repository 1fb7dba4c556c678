"""`/status`: this conversation's session and model, whether a turn runs, today's usage."""

from __future__ import annotations

from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    conversations = call.host.conversations
    session = await conversations.session(call.conversation)
    model = await conversations.model(call.conversation)
    running = "a turn is running" if conversations.running(call.conversation) else "idle"
    today = await call.host.usage_today()
    return (
        f"Session: {session} ({running}). Model: {model}. "
        f"Today: {today.get('total_tokens', 0)} tokens in {today.get('calls', 0)} model calls."
    )


COMMAND = ChatCommand("status", "this conversation's session, model and state", _run)
