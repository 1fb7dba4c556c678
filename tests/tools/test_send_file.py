"""The send_file tool: a workspace or media file becomes a typed reference on the turn's
reply (real path, kind, MIME type, size, hash, display name); every path the file tools
refuse is refused here too, and a file over `media.max_send_bytes` is not attached."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from squidd.core.reply_files import ReplyFiles
from squidd.tools.send_file import SendFileTool

pytestmark = pytest.mark.anyio


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace, media = tmp_path / "workspace", tmp_path / "data" / "media"
    workspace.mkdir()
    (media / "room").mkdir(parents=True)
    return workspace, media


def tool(dirs: tuple[Path, Path], files: ReplyFiles, max_bytes: int = 1000) -> SendFileTool:
    return SendFileTool(dirs[0], dirs[1], files, max_bytes=max_bytes)


async def test_a_workspace_file_and_a_received_one_are_attached(dirs: tuple[Path, Path]) -> None:
    workspace, media = dirs
    (workspace / "reports").mkdir()
    (workspace / "reports" / "q3.pdf").write_bytes(b"%PDF-1.4 q3")
    (media / "room" / "ab12.png").write_bytes(b"\x89PNG fake")
    files = ReplyFiles()
    send = tool(dirs, files)
    first = await send.execute({"path": "reports/q3.pdf"})
    second = await send.execute({"path": "media/room/ab12.png", "name": "chart.png"})
    assert not first.is_error and "q3.pdf" in first.content and not second.is_error
    pdf, png = files.files
    assert (pdf.kind, pdf.mime, pdf.name, pdf.size) == ("file", "application/pdf", "q3.pdf", 11)
    assert pdf.sha256 == hashlib.sha256(b"%PDF-1.4 q3").hexdigest()
    assert pdf.path == os.path.realpath(workspace / "reports" / "q3.pdf")
    assert (png.kind, png.mime, png.name) == ("image", "image/png", "chart.png")
    assert png.path == os.path.realpath(media / "room" / "ab12.png")
    again = await send.execute({"path": "reports/q3.pdf"})
    assert "already attached" in again.content and len(files.files) == 2


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "/etc/passwd", "escape/passwd", "media/../../secret.txt", "dev", "nope"],
)
async def test_what_the_file_tools_refuse_is_refused(
    dirs: tuple[Path, Path], tmp_path: Path, path: str
) -> None:
    workspace, _ = dirs
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "escape").symlink_to("/etc")
    (workspace / "dev").symlink_to("/dev/null")
    files = ReplyFiles()
    result = await tool(dirs, files).execute({"path": path})
    assert result.is_error
    assert files.files == ()


async def test_a_file_over_the_limit_is_not_attached_and_the_model_is_told(
    dirs: tuple[Path, Path],
) -> None:
    (dirs[0] / "big.bin").write_bytes(b"x" * 1001)
    files = ReplyFiles()
    result = await tool(dirs, files, max_bytes=1000).execute({"path": "big.bin"})
    assert result.is_error and "over the limit of 1000 bytes" in result.content
    assert files.files == ()


async def test_a_hostile_display_name_stays_a_name(dirs: tuple[Path, Path]) -> None:
    (dirs[0] / "a.txt").write_text("hi")
    files = ReplyFiles()
    result = await tool(dirs, files).execute({"path": "a.txt", "name": "../../x\x00y.txt"})
    assert not result.is_error
    [ref] = files.files
    assert "/" not in ref.name and "\x00" not in ref.name and ref.name.endswith(".txt")
