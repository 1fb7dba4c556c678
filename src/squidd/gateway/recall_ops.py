"""`squidd memory reindex` across the status socket, and without a daemon.

The vector index is derived data (store/recall_index.py). With the daemon running, the
command asks it (`memory.reindex`): the agent's index is emptied under the indexer's lock
and the indexer rebuilds it in the background, so no second process ever writes the files
the daemon has open. With no daemon listening, the command rebuilds it itself; a daemon
that listens but does not answer in time is reported, never raced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from squidd.config import Settings
from squidd.core.ports import ControlOp
from squidd.gateway.recall import Recall
from squidd.gateway.runtime import build_runtime
from squidd.gateway.status import ask, socket_path

__all__ = ["REINDEX", "recall_ops", "reindex"]

REINDEX = "memory.reindex"
NOTHING = (
    "nothing reindexed: no embeddings model is configured ([memory.recall] embeddings), "
    "or another squidd process holds the index"
)


def recall_ops(agents: Mapping[str, Recall | None]) -> dict[str, ControlOp]:
    """The daemon's side: `memory.reindex` for one agent (by name) or all."""

    async def reindex_op(request: Mapping[str, Any]) -> dict[str, Any]:
        wanted = str(request.get("agent") or "")
        if wanted and wanted not in agents:
            return {"error": f"no agent named {wanted!r}"}
        names = [wanted] if wanted else list(agents)
        done = []
        for name in names:
            recall = agents[name]
            if recall is not None and await recall.reset():
                done.append(name)
        if not done:
            return {"error": NOTHING}
        return {"agents": done, "by": "daemon"}  # its indexer embeds them again

    return {REINDEX: reindex_op}


def reindex(settings: Settings, agent: str | None, *, timeout_s: float = 30.0) -> dict[str, Any]:
    """The command's side: ask the daemon, else rebuild here (rows per agent)."""
    try:
        return ask(
            socket_path(settings), {"op": REINDEX, "agent": agent or ""}, timeout_s=timeout_s
        )
    except (FileNotFoundError, ConnectionRefusedError):
        pass  # no daemon listening: rebuilt by this process
    except OSError as exc:
        # A daemon is there but did not answer: never rebuild beside it (it has the index
        # open and its indexer writes it).
        reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        return {"error": f"the running daemon did not answer ({reason}); try again"}
    names = [agent] if agent else settings.agent_names
    if agent and agent not in settings.agent_names:
        return {"error": f"no agent named {agent!r}"}
    return anyio.run(_rebuild, settings, names)


async def _rebuild(settings: Settings, names: list[str]) -> dict[str, Any]:
    rows: dict[str, int] = {}
    for name in names:
        runtime = build_runtime(settings, agent=name)
        try:
            recall = runtime.recall
            if recall is not None and recall.index is not None and await recall.reset():
                rows[name] = await recall.catch_up()
        finally:
            await runtime.aclose()
    if not rows:
        return {"error": NOTHING}
    return {"agents": list(rows), "rows": rows, "by": "command"}
