"""The `send_file` tool: attach a file of the workspace (or a received one) to the reply.

The path is checked exactly as the file tools check theirs (`WorkspaceJail`: no `..`, no
way out through a symlink, a regular file opened with `O_NOFOLLOW`); `media/...` names a
file of the media dir under its own jail. Nothing is uploaded here: the tool records a
`FileRef` (real path, kind, MIME type, size, SHA-256, display name) in the turn's
`ReplyFiles`, and the reply carries it through the outbox to the channel, which uploads
(Matrix) or attaches (email) at delivery. Over `media.max_send_bytes` the model is told,
and nothing is attached.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import anyio.to_thread
import structlog
from pydantic import Field

from squidd.core.journal import Effect
from squidd.core.models import ToolResult
from squidd.core.reply_files import FileKind, FileRef, ReplyFiles
from squidd.errors import ToolError
from squidd.fs import display_name
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared
from squidd.tools.files import WorkspaceJail, media_relative, open_regular

log = structlog.get_logger()

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_CHUNK = 1024 * 1024


class SendFileArguments(Arguments):
    path: str = Field(description="e.g. reports/summary.pdf")
    name: str = Field("", description="file name shown (default: its own)")


class SendFileTool(Declared[SendFileArguments], name="send_file", effect=Effect.SIDE_EFFECT):
    description = (
        "Send a file with your reply: a file of the workspace (relative path) or a "
        "received attachment (media/...). It goes out with your answer (Matrix: as an "
        "image or a file; email: as an attachment). Say in your answer what you sent."
    )

    def __init__(
        self, workspace: Path, media_dir: Path, files: ReplyFiles, *, max_bytes: int
    ) -> None:
        self._jail = WorkspaceJail(workspace)
        self._media_dir = media_dir
        self._media = WorkspaceJail(media_dir)
        self._files = files
        self._max_bytes = max_bytes

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            args = self.parse(arguments)
            ref = await anyio.to_thread.run_sync(self._describe, args.path, args.name)
            added = self._files.add(ref)
        except (ToolError, ValueError) as exc:
            log.info("tool_refused", tool=self.name, reason=str(exc))
            return ToolResult(str(exc), is_error=True)
        log.info("file_attached", name=ref.name, size=ref.size, mime=ref.mime, new=added)
        if not added:
            return ToolResult(f"{ref.name} is already attached to this reply.")
        return ToolResult(
            f"Attached {ref.name} ({ref.mime}, {ref.size} bytes); it is sent with your reply."
        )

    def _describe(self, raw: str, name: str) -> FileRef:
        inside = media_relative(self._media_dir, raw)
        jail, rel = (self._jail, raw) if inside is None else (self._media, inside)
        real = jail.resolve(rel)
        shown = raw if inside is not None else jail.display(real)
        fd, info = open_regular(real, shown, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            if info.st_size > self._max_bytes:
                raise ToolError(
                    f"{shown}: {info.st_size} bytes is over the limit of {self._max_bytes} "
                    "bytes for a file sent with a reply; not attached"
                )
            if info.st_size == 0:
                raise ToolError(f"{shown}: the file is empty; not attached")
            digest = hashlib.sha256()
            size = 0
            while chunk := handle.read(_CHUNK):
                size += len(chunk)
                digest.update(chunk)
        shown_name = display_name(name or PurePosixPath(real.name).name) or "file"
        mime = mimetypes.guess_type(shown_name)[0] or mimetypes.guess_type(real.name)[0]
        mime = mime or "application/octet-stream"
        kind: FileKind = "image" if mime in _IMAGE_TYPES else "file"
        return FileRef(str(real), kind, mime, size, digest.hexdigest(), shown_name)
