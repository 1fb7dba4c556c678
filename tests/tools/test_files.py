"""The workspace file tools: every escape attempt fails closed with a clear error result."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from squidd.config.tools import FilesSettings
from squidd.core.models import ToolResult
from squidd.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool, file_tools

pytestmark = pytest.mark.anyio

SECRET = "outside secret\n"


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """tmp/workspace (the jail), tmp/secret.txt and tmp/workspace-evil/x.txt outside it."""
    workspace = tmp_path / "workspace"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "todo.md").write_text("- milk\n- eggs\n")
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "workspace-evil").mkdir()
    (tmp_path / "workspace-evil" / "x.txt").write_text(SECRET)
    return tmp_path


def tools(layout: Path, **caps: int) -> dict[str, Any]:
    return {t.name: t for t in file_tools(layout / "workspace", FilesSettings(**caps))}


async def call(layout: Path, tool: str, arguments: Mapping[str, Any], **caps: int) -> ToolResult:
    result: ToolResult = await tools(layout, **caps)[tool].execute(arguments)
    return result


def assert_outside_untouched(layout: Path) -> None:
    assert (layout / "secret.txt").read_text() == SECRET
    assert (layout / "workspace-evil" / "x.txt").read_text() == SECRET
    assert sorted(p.name for p in (layout / "workspace-evil").iterdir()) == ["x.txt"]
    assert sorted(p.name for p in layout.iterdir()) == ["secret.txt", "workspace", "workspace-evil"]


ESCAPES = {
    "dotdot": ("../secret.txt", "'..' is not allowed"),
    "dotdot_nested": ("notes/../../secret.txt", "'..' is not allowed"),
    "dotdot_into_sibling": ("../workspace-evil/x.txt", "'..' is not allowed"),
    "absolute_outside": ("{tmp}/secret.txt", "absolute path outside the workspace"),
    "absolute_system": ("/etc/passwd", "absolute path outside the workspace"),
    "sibling_prefix": ("{tmp}/workspace-evil/x.txt", "absolute path outside the workspace"),
    "sibling_prefix_dotdot": ("{tmp}/workspace/../workspace-evil/x.txt", "'..' is not allowed"),
    "device_absolute": ("/dev/zero", "absolute path outside the workspace"),
}


def escape_args(tool: str, raw: str, layout: Path) -> dict[str, Any]:
    path = raw.format(tmp=layout)
    if tool == "write_file":
        return {"path": path, "content": "pwned"}
    if tool == "edit_file":
        return {"path": path, "old_text": "outside", "new_text": "pwned"}
    return {"path": path}


@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "list_dir"])
@pytest.mark.parametrize("case", sorted(ESCAPES))
async def test_path_escapes_are_refused(layout: Path, tool: str, case: str) -> None:
    raw, expected = ESCAPES[case]
    result = await call(layout, tool, escape_args(tool, raw, layout))
    assert result.is_error
    assert expected in result.content
    assert SECRET.strip() not in result.content
    assert_outside_untouched(layout)


@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file"])
async def test_symlinked_file_pointing_out_is_refused(layout: Path, tool: str) -> None:
    (layout / "workspace" / "link.txt").symlink_to(layout / "secret.txt")
    result = await call(layout, tool, escape_args(tool, "link.txt", layout))
    assert result.is_error
    assert "leads outside the workspace" in result.content
    assert_outside_untouched(layout)


@pytest.mark.parametrize("tool", ["read_file", "write_file", "list_dir"])
async def test_symlinked_directory_pointing_out_is_refused(layout: Path, tool: str) -> None:
    # A directory link to the sibling with the tricky prefix.
    (layout / "workspace" / "evil").symlink_to(layout / "workspace-evil")
    path = "evil" if tool == "list_dir" else ("evil/x.txt" if tool == "read_file" else "evil/new")
    result = await call(layout, tool, escape_args(tool, path, layout))
    assert result.is_error
    assert "leads outside the workspace" in result.content
    assert_outside_untouched(layout)


async def test_dangling_symlink_pointing_out_is_not_written_through(layout: Path) -> None:
    (layout / "workspace" / "drop.txt").symlink_to(layout / "created-outside.txt")
    result = await call(layout, "write_file", {"path": "drop.txt", "content": "pwned"})
    assert result.is_error
    assert "leads outside the workspace" in result.content
    assert not (layout / "created-outside.txt").exists()


async def test_symlink_to_a_device_is_refused(layout: Path) -> None:
    (layout / "workspace" / "zero").symlink_to("/dev/zero")
    result = await call(layout, "read_file", {"path": "zero"})
    assert result.is_error
    assert "leads outside the workspace" in result.content


async def test_device_file_inside_the_workspace_is_refused(layout: Path) -> None:
    device = layout / "workspace" / "null"
    try:
        os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    for tool in ("read_file", "write_file", "edit_file"):
        result = await call(layout, tool, escape_args(tool, "null", layout))
        assert result.is_error, tool
        assert "not a regular file" in result.content, tool
    assert stat.S_ISCHR(device.lstat().st_mode)


async def test_fifo_and_socket_are_refused_without_blocking(layout: Path) -> None:
    os.mkfifo(layout / "workspace" / "pipe")
    result = await call(layout, "read_file", {"path": "pipe"})
    assert result.is_error
    assert "not a regular file" in result.content
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(layout / "workspace" / "sock"))
        result = await call(layout, "read_file", {"path": "sock"})
    assert result.is_error
    assert "cannot open" in result.content or "not a regular file" in result.content


async def test_read_cap(layout: Path) -> None:
    (layout / "workspace" / "big.txt").write_text("x" * 1025)
    result = await call(layout, "read_file", {"path": "big.txt"}, max_read_bytes=1024)
    assert result.is_error
    assert "1025 bytes is over the read cap of 1024 bytes" in result.content
    fits = await call(layout, "read_file", {"path": "big.txt"}, max_read_bytes=1025)
    assert fits.content == "x" * 1025


async def test_write_cap(layout: Path) -> None:
    result = await call(
        layout, "write_file", {"path": "big.txt", "content": "é" * 600}, max_write_bytes=1024
    )
    assert result.is_error
    assert "1200 bytes is over the write cap of 1024 bytes" in result.content
    assert not (layout / "workspace" / "big.txt").exists()


async def test_edit_result_over_the_write_cap_is_refused(layout: Path) -> None:
    target = layout / "workspace" / "notes" / "todo.md"
    before = target.read_text()
    result = await call(
        layout,
        "edit_file",
        {"path": "notes/todo.md", "old_text": "milk", "new_text": "m" * 2000},
        max_write_bytes=1024,
    )
    assert result.is_error
    assert "over the write cap" in result.content
    assert target.read_text() == before


@pytest.mark.parametrize("path", ["", "   ", "a\x00b", 7])
async def test_bad_path_arguments(layout: Path, path: object) -> None:
    result = await call(layout, "read_file", {"path": path})
    assert result.is_error
    assert "path" in result.content or "string" in result.content


async def test_binary_file_is_refused(layout: Path) -> None:
    (layout / "workspace" / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    result = await call(layout, "read_file", {"path": "blob.bin"})
    assert result.is_error
    assert "not UTF-8 text" in result.content


async def test_memory_file_is_left_to_memory_write(layout: Path) -> None:
    (layout / "workspace" / "MEMORY.md").write_text("# Memory\n")
    result = await call(layout, "write_file", {"path": "MEMORY.md", "content": "x"})
    assert result.is_error
    assert "memory_write" in result.content
    assert (layout / "workspace" / "MEMORY.md").read_text() == "# Memory\n"


async def test_missing_workspace_is_a_clear_error(tmp_path: Path) -> None:
    result = await ReadFileTool(tmp_path / "nope").execute({"path": "a.md"})
    assert result.is_error
    assert "squidd init" in result.content


# --- what the tools are for ------------------------------------------------------------------


async def test_write_read_edit_list_round_trip(layout: Path) -> None:
    workspace = layout / "workspace"
    written = await WriteFileTool(workspace).execute(
        {"path": "projects/garden.md", "content": "plant tomatoes\nwater daily\n"}
    )
    assert not written.is_error
    assert written.content == "created projects/garden.md (27 bytes)"
    assert (workspace / "projects" / "garden.md").read_text() == "plant tomatoes\nwater daily\n"

    edited = await EditFileTool(workspace).execute(
        {"path": "projects/garden.md", "old_text": "tomatoes", "new_text": "basil"}
    )
    assert edited.content == "edited projects/garden.md"
    read = await ReadFileTool(workspace).execute({"path": "projects/garden.md"})
    assert read.content == "plant basil\nwater daily\n"

    listing = await ListDirTool(workspace).execute({})
    assert listing.content.splitlines() == ["notes/", "projects/"]
    listing = await ListDirTool(workspace).execute({"path": "projects"})
    assert listing.content == "garden.md  24"
    assert sorted(p.name for p in (workspace / "projects").iterdir()) == ["garden.md"]


async def test_absolute_path_inside_and_inner_symlink_are_fine(layout: Path) -> None:
    workspace = layout / "workspace"
    (workspace / "todo-link.md").symlink_to(workspace / "notes" / "todo.md")
    by_link = await ReadFileTool(workspace).execute({"path": "todo-link.md"})
    by_absolute = await ReadFileTool(workspace).execute(
        {"path": str(workspace / "notes" / "todo.md")}
    )
    assert by_link.content == by_absolute.content == "- milk\n- eggs\n"


async def test_workspace_reached_through_a_symlink_still_confines(layout: Path) -> None:
    (layout / "ws-link").symlink_to(layout / "workspace")
    tool = ReadFileTool(layout / "ws-link")
    ok = await tool.execute({"path": str(layout / "ws-link" / "notes" / "todo.md")})
    assert ok.content == "- milk\n- eggs\n"
    refused = await tool.execute({"path": str(layout / "workspace-evil" / "x.txt")})
    assert refused.is_error


@pytest.mark.parametrize(
    ("old", "message"),
    [("bread", "old_text not found"), ("- ", "old_text occurs 2 times"), ("", "must not be empty")],
)
async def test_edit_needs_exactly_one_match(layout: Path, old: str, message: str) -> None:
    target = layout / "workspace" / "notes" / "todo.md"
    before = target.read_text()
    result = await EditFileTool(layout / "workspace").execute(
        {"path": "notes/todo.md", "old_text": old, "new_text": "x"}
    )
    assert result.is_error
    assert message in result.content
    assert target.read_text() == before


async def test_list_dir_marks_symlinks_and_caps_entries(layout: Path) -> None:
    workspace = layout / "workspace"
    for i in range(5):
        (workspace / f"f{i}.md").write_text("")
    (workspace / "out").symlink_to(layout / "secret.txt")
    listing = await ListDirTool(workspace, FilesSettings(max_list_entries=3)).execute({})
    assert listing.content.splitlines() == [
        "f0.md  0",
        "f1.md  0",
        "f2.md  0",
        "... and 4 more entries",
    ]
    full = await ListDirTool(workspace).execute({})
    assert "out@" in full.content.splitlines()


async def test_list_dir_shows_odd_file_names_as_valid_text_on_one_line(layout: Path) -> None:
    """A name of bytes that are not UTF-8 (os.listdir hands back surrogate escapes), or with
    a line break or an escape sequence in it, is listed as valid text, one entry a line."""
    workspace = layout / "workspace"
    (workspace / "plain.txt").write_text("x")
    os.close(os.open(os.path.join(os.fsencode(workspace), b"caf\xe9.txt"), os.O_CREAT, 0o600))
    (workspace / "two\nlines\x1b[2J.txt").write_text("x")
    listing = await ListDirTool(workspace).execute({})
    assert not listing.is_error
    listing.content.encode("utf-8")  # no surrogate escape left
    assert "\x1b" not in listing.content
    lines = listing.content.splitlines()
    assert "café.txt  0  (name shown cleaned: not usable as a path)" in lines
    assert "two lines[2J.txt  1  (name shown cleaned: not usable as a path)" in lines
    assert "plain.txt  1" in lines and len(lines) == 4  # and notes/
