"""`/usage`: today's model calls, tokens and money, as `squidd status` counts them."""

from __future__ import annotations

from squidd.gateway.chat_commands.base import ChatCommand, CommandCall


async def _run(call: CommandCall) -> str:
    today = await call.host.usage_today()
    cost = float(today.get("cost") or 0.0)
    money = f", cost {cost:.4f}" if cost else ""
    calls = int(today.get("calls") or 0)
    return (
        f"Usage today ({today.get('day')}): {today.get('total_tokens', 0)} tokens "
        f"({today.get('prompt_tokens', 0)} input, {today.get('completion_tokens', 0)} output) "
        f"in {calls} model call{'' if calls == 1 else 's'}{money}."
    )


COMMAND = ChatCommand("usage", "today's tokens and money spent on the model", _run)
