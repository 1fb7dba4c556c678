"""The workspace: its prompt files and the system prompt built from them.

The workspace is a folder of Markdown the owner edits: `SOUL.md` (character), `AGENTS.md`
(operating instructions), `USER.md` (about the owner) make the base system prompt;
`HEARTBEAT.md` is the heartbeat's checklist and `MEMORY.md` the global memory, which the
memory manager adds under its own heading (so neither is part of the base prompt here).

`WorkspacePrompt` re-reads the files only when one of them changed (modification time,
size, inode), so an edit applies on the next message without a restart; `invalidate()`
forgets the cache (SIGHUP).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import anyio.to_thread
import structlog

log = structlog.get_logger()

PROMPT_FILES = ("SOUL.md", "AGENTS.md", "USER.md")
WORKSPACE_FILES = ("SOUL.md", "AGENTS.md", "USER.md", "HEARTBEAT.md", "MEMORY.md")
CONFIG_TEMPLATE = "config.example.toml"
MAX_FILE_CHARS = 32_000

_Stamp = tuple[int, int, int, int] | None


def template_text(name: str) -> str:
    """A file shipped in `squidd/templates` (works from an installed wheel)."""
    return resources.files("squidd").joinpath("templates", name).read_text(encoding="utf-8")


def _stamp(path: Path) -> _Stamp:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino)


class WorkspacePrompt:
    """Implements `squidd.core.ports.PromptSource` from the workspace's prompt files."""

    def __init__(
        self,
        workspace: Path,
        *,
        files: Sequence[str] = PROMPT_FILES,
        extra: str = "",
        fallback: str = "",
        max_file_chars: int = MAX_FILE_CHARS,
    ) -> None:
        self._workspace = workspace
        self._files = tuple(files)
        self._extra = extra.strip()
        self._fallback = fallback.strip()
        self._max_chars = max_file_chars
        self._cache: tuple[tuple[_Stamp, ...], str] | None = None

    async def system_prompt(self) -> str:
        return await anyio.to_thread.run_sync(self.current)

    def invalidate(self) -> None:
        self._cache = None

    def current(self) -> str:
        """The prompt (blocking: for a worker thread); re-read only when a file's stamp
        moved."""
        paths = [self._workspace / name for name in self._files]
        # Stamps are taken before reading: a change during the read shows up next time.
        stamps = tuple(_stamp(path) for path in paths)
        cached = self._cache
        if cached is not None and cached[0] == stamps:
            return cached[1]
        text = self._build(paths)
        self._cache = (stamps, text)
        log.info(
            "workspace_prompt_loaded", files=sum(s is not None for s in stamps), chars=len(text)
        )
        return text

    def _build(self, paths: Sequence[Path]) -> str:
        parts: list[str] = []
        for path in paths:
            try:
                content = path.read_text(encoding="utf-8", errors="replace").strip()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("workspace_file_unreadable", file=path.name, reason=exc.strerror)
                continue
            if len(content) > self._max_chars:
                content = content[: self._max_chars] + f"\n[{path.name} truncated]"
            if content:
                parts.append(content)
        if not parts and self._fallback:
            parts.append(self._fallback)
        if self._extra:
            parts.append(self._extra)
        return "\n\n".join(parts)
