"""What a daemon's turn reads before it asks the model, in one worker-thread hand-off.

The session's window, MEMORY.md, the session's summary (store/jsonl.py), the workspace's
prompt files (workspace.py, re-read only when a file's stamp moved) and the skills index
(tools/skills.py, likewise) are read by one `anyio.to_thread.run_sync` call instead of one
each: a hand-off costs the event loop more CPU than reading these small files does, and a
turn made five of them before its model call.
"""

from __future__ import annotations

import anyio.to_thread

from squidd.core.models import SessionId, TurnReads
from squidd.store.jsonl import JsonlStore
from squidd.tools.skills import SkillCatalog
from squidd.workspace import WorkspacePrompt

__all__ = ["TurnFiles"]


class TurnFiles:
    """Implements `core.ports.TurnReader` over an agent's store, workspace prompt and
    skills (None: skills off)."""

    def __init__(
        self, store: JsonlStore, prompt: WorkspacePrompt, skills: SkillCatalog | None
    ) -> None:
        self._store = store
        self._prompt = prompt
        self._skills = skills

    async def read(self, session_id: SessionId, memory_of: str | None) -> TurnReads:
        return await anyio.to_thread.run_sync(self._read_sync, session_id, memory_of)

    def _read_sync(self, session_id: SessionId, memory_of: str | None) -> TurnReads:
        window, global_memory, summary = self._store.read_turn_sync(session_id, memory_of)
        index = self._skills.index_text() if self._skills is not None else ""
        parts = (index,) if index else ()
        return TurnReads(window, global_memory, summary, self._prompt.current(), parts)
