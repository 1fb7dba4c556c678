"""`squidd memory reindex [--agent NAME]`: rebuild the recall index (the vectors).

The running daemon is asked to do it (its indexer rebuilds in the background); without a
daemon the command embeds everything itself and says how many messages it indexed.
"""

from __future__ import annotations

import argparse

from squidd.commands import Commands
from squidd.config import Settings

__all__ = ["register"]


def register(commands: Commands) -> None:
    memory = commands.add("memory", help="the assistant's memory", example="squidd memory reindex")
    actions = commands.actions(memory, "memory_command")
    actions.add(
        "reindex",
        help="rebuild the recall index from the histories, summaries and MEMORY.md",
        run=_reindex,
        example="squidd memory reindex --agent main",
    ).add_argument("--agent", help="only this agent (default: every agent)")


def _reindex(args: argparse.Namespace, settings: Settings) -> int:
    from squidd.gateway.recall_ops import reindex  # the runtime only for this command

    answer = reindex(settings, args.agent)
    if "error" in answer:
        print(f"memory reindex: {answer['error']}")
        return 1
    agents = ", ".join(str(a) for a in answer.get("agents", []))
    if answer.get("by") == "daemon":
        print(f"reindexing {agents} in the running daemon (in the background)")
    else:
        rows = answer.get("rows", {})
        print(f"reindexed {agents}: " + ", ".join(f"{n} {c} messages" for n, c in rows.items()))
    return 0
