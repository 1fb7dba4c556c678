"""`/status`: this conversation's session and model, whether a turn runs, today's usage;
with several agents, the answering agent's own usage and caps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
        + _agent(await call.host.agent_figures())
        + _providers(call.host.model_state())
    )


def _agent(figures: Mapping[str, Any]) -> str:
    """The agent answering, its own usage today and its own caps (several agents only)."""
    if not figures:
        return ""
    usage = figures.get("usage_today") or {}
    text = (
        f" Agent: {figures['name']}, {usage.get('total_tokens', 0)} tokens in "
        f"{usage.get('calls', 0)} model calls today."
    )
    for cap in figures.get("limits") or ():
        mark = " (reached)" if cap.get("reached") else ""
        text += f" Cap {cap['scope']}: {cap['used']:g} of {cap['cap']:g}{mark}."
    return text


def _providers(state: Mapping[str, Any]) -> str:
    """Who answered last and how each provider is, when the chain has more than one."""
    providers = state.get("providers") or []
    if len(providers) < 2:
        return ""
    parts = []
    for provider in providers:
        text = f"{provider['name']} {provider['state']}"
        if provider.get("cooling_until"):
            text += f" until {provider['cooling_until']}"
        parts.append(text)
    last = state.get("last_success_model")
    answered = f" Last answer from {last}." if last else ""
    return f"{answered} Providers: {', '.join(parts)}."


COMMAND = ChatCommand("status", "this conversation's session, model and state", _run)
