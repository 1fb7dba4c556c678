"""File tools confined to the workspace: `read_file`, `write_file`, `edit_file`, `list_dir`.

Whoever can message the assistant can ask it to use these, so every path is checked the
same way before any I/O: no `..` component, absolute paths only inside the workspace,
symlinks resolved and the real path compared with the real workspace by whole path
components (so `workspace-evil` is not inside `workspace`), the final component opened
with `O_NOFOLLOW`, and only regular files read or replaced (no devices, pipes, sockets).
Reads and writes are capped. Every refusal is a `ToolError` with a message for the model.

Known limit: these checks do not defend against a concurrent process swapping a parent
directory for a symlink between the check and the open. Only the shell tool (off by
default) could do that, and whoever has the shell already has the daemon user's access.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, TypeVar

import anyio.to_thread
import structlog
from pydantic import Field

from squidd.config.tools import FilesSettings
from squidd.core.journal import Effect
from squidd.core.models import ToolResult
from squidd.errors import ToolError
from squidd.fs import FILE_MODE, make_private_dir
from squidd.text import clean_text
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared

log = structlog.get_logger()

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_LINE_BREAKS = str.maketrans("\t\n\r", "   ")


class WorkspaceJail:
    """Maps a path given by the model to a real path inside the workspace, or refuses."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def real_root(self) -> Path:
        real = Path(os.path.realpath(self._root))
        if not real.is_dir():
            raise ToolError("the workspace does not exist yet (run `squidd init`)")
        return real

    def display(self, real: Path) -> str:
        """The path as the model should see it: relative to the workspace."""
        rel = real.relative_to(self.real_root())
        return str(rel) if str(rel) != "." else "."

    def resolve(self, raw: object) -> Path:
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("path must be a non-empty string (relative to the workspace)")
        if "\x00" in raw:
            raise ToolError("path must not contain NUL characters")
        pure = PurePosixPath(raw)
        if ".." in pure.parts:
            raise ToolError(
                f"refused {raw!r}: '..' is not allowed; name a path inside the workspace"
            )
        root = self.real_root()
        if pure.is_absolute():
            lexical = Path(os.path.normpath(raw))
            # Accept the workspace as configured or as resolved; whole components only.
            inside = next(
                (base for base in (root, self._root.absolute()) if lexical.is_relative_to(base)),
                None,
            )
            if inside is None:
                raise ToolError(f"refused {raw!r}: absolute path outside the workspace")
            candidate = root / lexical.relative_to(inside)
        else:
            candidate = root / pure
        real = Path(os.path.realpath(candidate))
        if not real.is_relative_to(root):
            raise ToolError(f"refused {raw!r}: it leads outside the workspace (symlink)")
        return real


def open_regular(real: Path, shown: str, flags: int) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(real, flags | _OPEN_FLAGS)
    except FileNotFoundError:
        raise ToolError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise ToolError(f"{shown}: is a directory (use list_dir)") from None
    except OSError as exc:
        raise ToolError(f"{shown}: cannot open: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory (use list_dir)" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ToolError(f"{shown}: refused, {kind} (devices, pipes and sockets are off limits)")
    return fd, info


def _read_text(jail: WorkspaceJail, raw: str, cap: int) -> tuple[Path, str, str]:
    real = jail.resolve(raw)
    shown = jail.display(real)
    fd, info = open_regular(real, shown, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > cap:
            raise ToolError(f"{shown}: {info.st_size} bytes is over the read cap of {cap} bytes")
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise ToolError(f"{shown}: over the read cap of {cap} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown}: not UTF-8 text (binary files are not supported)") from None
    return real, shown, text


# Kept by its own tool: memory_write caps it, and the memory design relies on that.
PROTECTED_FILES = frozenset({"MEMORY.md"})


def _atomic_replace(jail: WorkspaceJail, real: Path, shown: str, data: bytes) -> bool:
    """Write `data` to `real` through a temporary file and a rename; True if it was new."""
    if shown in PROTECTED_FILES:
        raise ToolError(f"{shown} is kept by the memory_write tool; use that instead")
    created = False
    try:
        info = os.lstat(real)
    except FileNotFoundError:
        created = True
        mode = FILE_MODE
    else:
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{shown}: refused, exists and is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
    parent = real.parent
    root = jail.real_root()
    try:
        make_private_dir(parent)
    except NotADirectoryError:
        raise ToolError(f"{shown}: a parent is a file, not a directory") from None
    except OSError as exc:
        raise ToolError(f"{shown}: cannot create its directory: {exc.strerror}") from None
    if not Path(os.path.realpath(parent)).is_relative_to(root):
        raise ToolError(f"refused {shown!r}: it leads outside the workspace")
    tmp = parent / f".{real.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ToolError(f"{shown}: cannot write: {exc.strerror}") from None
    return created


_RESULT_READ_CAP = 16 * 1024 * 1024
A = TypeVar("A", bound=Arguments)


class _FileTool(Declared[A]):
    """Shared plumbing: argument errors and refusals become error results for the model."""

    description = ""

    def __init__(self, workspace: Path, settings: FilesSettings | None = None) -> None:
        self._jail = WorkspaceJail(workspace)
        self._settings = settings or FilesSettings()

    def _work(self, arguments: Mapping[str, Any]) -> Callable[[], str]:
        raise NotImplementedError

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            work = self._work(arguments)
            content = await anyio.to_thread.run_sync(work)
        except ToolError as exc:
            log.info("tool_refused", tool=self.name, reason=str(exc))
            return ToolResult(str(exc), is_error=True)
        return ToolResult(content)


class ReadArguments(Arguments):
    path: str = Field(description="e.g. notes/todo.md")
    offset: Annotated[int, Field(ge=0, description="first character")] = 0
    limit: Annotated[int, Field(ge=1, description="characters to read")] | None = None


class WriteArguments(Arguments):
    path: str = Field(description="relative to the workspace")
    content: str = Field(description="the whole new content")


class EditArguments(Arguments):
    path: str = Field(description="relative to the workspace")
    old_text: str = Field(min_length=1, description="exact text to replace")
    new_text: str = Field(description="replacement text")


class ListArguments(Arguments):
    path: str = Field(".", description="default '.'")


class ReadFileTool(_FileTool[ReadArguments], name="read_file", effect=Effect.READ_ONLY):
    description = (
        "Read a UTF-8 text file of the workspace (paths relative to it), a saved long "
        "tool result (tool-results/...) or a received attachment (media/... or its saved "
        "path; read-only). offset and limit, in characters, read a part."
    )

    def __init__(
        self,
        workspace: Path,
        settings: FilesSettings | None = None,
        *,
        results_dir: Path | None = None,
        media_dir: Path | None = None,
    ) -> None:
        super().__init__(workspace, settings)
        # Saved tool results and received media are read-only and live beside the
        # workspace, not in it; each has its own jail with the same guards.
        self._results = WorkspaceJail(results_dir) if results_dir is not None else None
        self._media = WorkspaceJail(media_dir) if media_dir is not None else None
        self._media_dir = media_dir

    def _work(self, arguments: Mapping[str, Any]) -> Callable[[], str]:
        args = self.parse(arguments)
        return partial(self._read, args.path, args.offset, args.limit)

    def _read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        prefix = "tool-results/"
        if self._results is not None and path.startswith(prefix):
            cap = max(self._settings.max_read_bytes, _RESULT_READ_CAP)
            _, _, text = _read_text(self._results, path.removeprefix(prefix), cap)
        elif self._media is not None and (media := self._media_path(path)) is not None:
            _, _, text = _read_text(self._media, media, self._settings.max_read_bytes)
        else:
            _, _, text = _read_text(self._jail, path, self._settings.max_read_bytes)
        if offset == 0 and limit is None:
            return text if text else "(empty file)"
        end = len(text) if limit is None else min(len(text), offset + limit)
        part = text[offset:end]
        more = f"; continue with offset={end}" if end < len(text) else "; end of file"
        return f"[characters {offset}-{end} of {len(text)}{more}]\n{part}"

    def _media_path(self, path: str) -> str | None:
        return None if self._media_dir is None else media_relative(self._media_dir, path)


def media_relative(media_dir: Path, path: str) -> str | None:
    """The path inside the media dir when `path` names it (`media/...` or absolute), for
    its own `WorkspaceJail`; None when it names a workspace path."""
    if path.startswith("media/"):
        return path.removeprefix("media/")
    bases = (media_dir.absolute(), Path(os.path.realpath(media_dir)))
    if os.path.isabs(path) and any(Path(path).is_relative_to(b) for b in bases):
        return path
    return None


class WriteFileTool(_FileTool[WriteArguments], name="write_file", effect=Effect.IDEMPOTENT):
    description = (
        "Create or replace a UTF-8 text file in the workspace with the given content. "
        "Missing directories are created."
    )

    def _work(self, arguments: Mapping[str, Any]) -> Callable[[], str]:
        args = self.parse(arguments)
        return partial(self._write, args.path, args.content)

    def _write(self, path: str, content: str) -> str:
        data = content.encode("utf-8")
        cap = self._settings.max_write_bytes
        if len(data) > cap:
            raise ToolError(f"refused: {len(data)} bytes is over the write cap of {cap} bytes")
        real = self._jail.resolve(path)
        shown = self._jail.display(real)
        if real == self._jail.real_root():
            raise ToolError("refused: the workspace itself is a directory, name a file in it")
        created = _atomic_replace(self._jail, real, shown, data)
        log.info("workspace_file_written", path=shown, bytes=len(data), created=created)
        return f"{'created' if created else 'replaced'} {shown} ({len(data)} bytes)"


class EditFileTool(_FileTool[EditArguments], name="edit_file", effect=Effect.SIDE_EFFECT):
    description = (
        "Replace one exact piece of text in a workspace file. Fails when old_text is not "
        "found or occurs more than once (then include more surrounding text)."
    )

    def _work(self, arguments: Mapping[str, Any]) -> Callable[[], str]:
        args = self.parse(arguments)
        return partial(self._edit, args.path, args.old_text, args.new_text)

    def _edit(self, path: str, old: str, new: str) -> str:
        real, shown, text = _read_text(self._jail, path, self._settings.max_read_bytes)
        count = text.count(old)
        if count == 0:
            raise ToolError(f"{shown}: old_text not found; read the file and copy it exactly")
        if count > 1:
            raise ToolError(
                f"{shown}: old_text occurs {count} times; include more text so it is unique"
            )
        data = text.replace(old, new, 1).encode("utf-8")
        cap = self._settings.max_write_bytes
        if len(data) > cap:
            raise ToolError(f"{shown}: the result would be over the write cap of {cap} bytes")
        _atomic_replace(self._jail, real, shown, data)
        log.info("workspace_file_edited", path=shown, bytes=len(data))
        return f"edited {shown}"


class ListDirTool(_FileTool[ListArguments], name="list_dir", effect=Effect.READ_ONLY):
    description = (
        "List a directory of the workspace ('.' for its top). Directories end with '/', "
        "symlinks with '@'; files show their size in bytes."
    )

    def _work(self, arguments: Mapping[str, Any]) -> Callable[[], str]:
        return partial(self._list, self.parse(arguments).path)

    def _list(self, path: str) -> str:
        real = self._jail.resolve(path)
        shown = self._jail.display(real)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | _OPEN_FLAGS)
        except FileNotFoundError:
            raise ToolError(f"{shown}: no such directory") from None
        except NotADirectoryError:
            raise ToolError(f"{shown}: not a directory (use read_file)") from None
        except OSError as exc:
            raise ToolError(f"{shown}: cannot open: {exc.strerror}") from None
        try:
            with os.scandir(fd) as entries:
                lines = [self._describe(entry) for entry in entries]
        finally:
            os.close(fd)
        lines.sort()
        cap = self._settings.max_list_entries
        more = len(lines) - cap
        lines = lines[:cap]
        if more > 0:
            lines.append(f"... and {more} more entries")
        return "\n".join(lines) if lines else f"{shown}: empty directory"

    @staticmethod
    def _describe(entry: os.DirEntry[str]) -> str:
        # A name of bytes that are not UTF-8 (a surrogate escape from the file system), or
        # with a line break or another control character in it, is shown as valid text on
        # one line, and said to be shown so: that name cannot be opened by these tools.
        name = clean_text(entry.name).translate(_LINE_BREAKS)
        odd = "  (name shown cleaned: not usable as a path)" if name != entry.name else ""
        if entry.is_symlink():
            return f"{name}@{odd}"
        if entry.is_dir(follow_symlinks=False):
            return f"{name}/{odd}"
        if entry.is_file(follow_symlinks=False):
            return f"{name}  {entry.stat(follow_symlinks=False).st_size}{odd}"
        return f"{name}  (special file){odd}"


def file_tools(
    workspace: Path,
    settings: FilesSettings | None = None,
    *,
    results_dir: Path | None = None,
    media_dir: Path | None = None,
) -> list[_FileTool[Any]]:
    """The four workspace tools; read_file also reads saved tool results in `results_dir`
    and received media in `media_dir` (both read-only)."""
    return [
        ReadFileTool(workspace, settings, results_dir=results_dir, media_dir=media_dir),
        WriteFileTool(workspace, settings),
        EditFileTool(workspace, settings),
        ListDirTool(workspace, settings),
    ]
