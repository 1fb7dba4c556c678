"""The workspace: `squidd init`, and the system prompt built from its Markdown files.

The workspace is a folder of Markdown the owner edits: `SOUL.md` (character), `AGENTS.md`
(operating instructions), `USER.md` (about the owner) make the base system prompt;
`HEARTBEAT.md` is the heartbeat's checklist and `MEMORY.md` the global memory, which the
memory manager adds under its own heading (so neither is part of the base prompt here).

`WorkspacePrompt` re-reads the files only when one of them changed (modification time,
size, inode), so an edit applies on the next message without a restart; `invalidate()`
forgets the cache (SIGHUP).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import anyio.to_thread
import structlog

from squidd.errors import ConfigError

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
        return await anyio.to_thread.run_sync(self._current)

    def invalidate(self) -> None:
        self._cache = None

    def _current(self) -> str:
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
                log.warning("workspace_file_unreadable", file=path.name, error=exc.strerror)
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


# --- squidd init ---------------------------------------------------------------------------


def default_config_path() -> Path:
    from_env = os.environ.get("SQUIDD_CONFIG")
    if from_env:
        return Path(from_env).expanduser()
    return Path.home() / ".config" / "squidd" / "config.toml"


def _create(path: Path, text: str, mode: int) -> bool:
    """Write a new file; False (and nothing touched) when the path exists in any form."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def _make_dir(path: Path, created: list[Path]) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    created.extend(reversed([p for p in missing if p.is_dir()]))


def init_command(config_path: Path | None) -> int:
    """Write a config and a workspace; never overwrite. Exit 0, or 2 on a bad config."""
    from squidd.config import load_settings

    target = (config_path or default_config_path()).expanduser()
    created: list[Path] = []
    kept: list[Path] = []
    try:
        _make_dir(target.parent, created)
        if _create(target, template_text(CONFIG_TEMPLATE), 0o600):
            created.append(target)
        else:
            kept.append(target)
    except OSError as exc:
        print(f"init: cannot write {target}: {exc.strerror}", file=sys.stderr)
        return 1

    try:
        settings = load_settings(target)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config: {problem}", file=sys.stderr)
        print(f"init: fix {target}, then run `squidd init` again", file=sys.stderr)
        return 2

    workspace = settings.workspace_dir
    try:
        _make_dir(workspace, created)
        for name in WORKSPACE_FILES:
            path = workspace / name
            (created if _create(path, template_text(name), 0o644) else kept).append(path)
    except OSError as exc:
        print(f"init: cannot write in {workspace}: {exc.strerror}", file=sys.stderr)
        return 1

    for path in created:
        print(f"created  {path}{'/' if path.is_dir() else ''}")
    if kept:
        print(f"kept {len(kept)} existing file(s) unchanged: {', '.join(p.name for p in kept)}")
    if not created:
        print("nothing to do: the config and the workspace already exist")
    flag = "" if config_path is None else f" --config {target}"
    print(
        "\nNext steps:\n"
        f"  1. Edit {target}: the LLM endpoint, model and API key (llm.api_key_file),\n"
        "     then the channels you want (matrix, email).\n"
        f"  2. Tell the assistant about you in {workspace / 'USER.md'}\n"
        f"     and shape its character in {workspace / 'SOUL.md'}.\n"
        f"  3. squidd{flag} config check\n"
        f"  4. squidd{flag} chat"
    )
    return 0
