"""read_file reads received media (`media/...` or the saved absolute path), read-only and jailed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.tools.files import file_tools

pytestmark = pytest.mark.anyio


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "workspace").mkdir()
    media = tmp_path / "data" / "media" / "s1"
    media.mkdir(parents=True)
    (media / "abc.txt").write_text("the attachment\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    (media / "link.txt").symlink_to(tmp_path / "secret.txt")
    found = file_tools(
        tmp_path / "workspace", results_dir=None, media_dir=tmp_path / "data" / "media"
    )
    return {t.name: t for t in found}


async def test_read_file_opens_media_by_prefix_and_by_saved_path(
    tools: dict[str, Any], tmp_path: Path
) -> None:
    by_prefix = await tools["read_file"].execute({"path": "media/s1/abc.txt"})
    saved = str(tmp_path / "data" / "media" / "s1" / "abc.txt")
    by_path = await tools["read_file"].execute({"path": saved})
    assert (by_prefix.is_error, by_prefix.content) == (False, "the attachment\n")
    assert (by_path.is_error, by_path.content) == (False, "the attachment\n")


@pytest.mark.parametrize("path", ["media/../secret.txt", "media/s1/link.txt"])
async def test_media_root_keeps_the_escape_guards(tools: dict[str, Any], path: str) -> None:
    result = await tools["read_file"].execute({"path": path})
    assert result.is_error
    assert "refused" in result.content


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_media_dir_is_never_writable(
    tools: dict[str, Any], tmp_path: Path, tool: str
) -> None:
    saved = str(tmp_path / "data" / "media" / "s1" / "abc.txt")
    if tool == "write_file":
        args: dict[str, str] = {"path": saved, "content": "x"}
    else:
        args = {"path": saved, "old_text": "the", "new_text": "x"}
    result = await tools[tool].execute(args)
    assert result.is_error
    assert (tmp_path / "data" / "media" / "s1" / "abc.txt").read_text() == "the attachment\n"
