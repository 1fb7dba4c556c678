"""What every turn works with, as one object: `TurnServices`, built once by the
composition root (gateway/runtime.py) and handed to `AgentLoop` (core/agent.py), whose
`TurnSteps` (core/turns.py) read it. A new collaborator of a turn is one field here and its
use in a step; nothing passes it along by hand.

Only `memory`, `registry` and `prompt` are needed; everything else is optional and off when
None. Per-call tools still come through `AgentLoop.run(..., extra_tools=...)`, never here.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from squidd.core.approvals import Approvals
from squidd.core.audit import Auditor
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, TurnReads
from squidd.core.ports import (
    AttachmentReader,
    PromptSource,
    ResultStore,
    ToolPolicy,
    TurnReader,
)
from squidd.core.resume import TurnRecording
from squidd.core.tool_calls import DEFAULT_MAX_RESULT_CHARS
from squidd.core.tools import ToolRegistry
from squidd.core.usage import UsageSink

__all__ = ["SeparateReads", "TurnLimits", "TurnServices"]


@dataclass(frozen=True, kw_only=True)
class TurnLimits:
    """The loop breakers' limits (core/loop_guard.py) of every turn."""

    max_tool_rounds: int = 20
    max_repeated_tool_calls: int = 3
    max_turn_seconds: float = 600.0
    monotonic: Callable[[], float] = time.monotonic


@dataclass(frozen=True, kw_only=True)
class TurnServices:
    """The collaborators every turn shares (see the module)."""

    memory: MemoryManager
    registry: ToolRegistry
    prompt: PromptSource
    limits: TurnLimits = field(default_factory=TurnLimits)
    prompt_parts: Callable[[], Awaitable[Sequence[str]]] | None = None
    """System prompt parts of every turn with their own cap (the skills index); they come
    before a run's own `extra_parts`."""
    reader: TurnReader | None = None
    """Reads a turn's window, memory texts, prompt and `prompt_parts` together (the daemon:
    in one worker-thread hand-off, gateway/turn_reads.py); None: `SeparateReads`, each
    from its own source in turn."""
    attachments: AttachmentReader | None = None
    policy: ToolPolicy | None = None
    on_demand: Sequence[str] = ()
    """Tools whose schemas are offered only when the model asks (core/on_demand.py)."""
    usage: UsageSink | None = None
    results: ResultStore | None = None
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    recording: TurnRecording | None = None
    """The journal turns with a `turn_id` record in and resume from (core/journal.py)."""
    auditor: Auditor | None = None
    approvals: Approvals | None = None
    recall_note: Callable[[str, str | None, str], Awaitable[str]] | None = None
    """The automatic recall step: (session, whose memory, the message) → a note put before
    the message in this turn's request only (never stored), "" for none."""


class SeparateReads:
    """A `TurnReader` that asks each source in turn: the memory port for the window and the
    texts, `prompt` and `prompt_parts` for the prompt (what a turn did before one reader
    read them together)."""

    def __init__(self, services: TurnServices) -> None:
        self._services = services

    async def read(self, session_id: SessionId, memory_of: str | None) -> TurnReads:
        services = self._services
        window = await services.memory.load_window(session_id)
        global_memory, summary = await services.memory.load_texts(session_id, memory_of)
        prompt = await services.prompt.system_prompt()
        parts = () if services.prompt_parts is None else tuple(await services.prompt_parts())
        return TurnReads(window, global_memory, summary, prompt, parts)
