"""The workspace: its packaged templates and the system prompt built from its files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.workspace import WorkspacePrompt, template_text

ROOT = Path(__file__).resolve().parents[1]


def test_packaged_config_example_matches_the_repository_copy() -> None:
    packaged = ROOT / "src" / "squidd" / "templates" / "config.example.toml"
    assert packaged.read_text() == (ROOT / "config.example.toml").read_text()
    assert template_text("config.example.toml") == packaged.read_text()


# --- the system prompt -----------------------------------------------------------------------


def write_workspace(path: Path) -> Path:
    path.mkdir()
    (path / "SOUL.md").write_text("I am calm.\n")
    (path / "AGENTS.md").write_text("Use tools.\n")
    (path / "USER.md").write_text("Owner: Ada.\n")
    (path / "HEARTBEAT.md").write_text("- [ ] check mail\n")
    (path / "MEMORY.md").write_text("likes tea\n")
    return path


def loads(logs: list[dict[str, object]]) -> int:
    return sum(1 for entry in logs if entry["event"] == "workspace_prompt_loaded")


@pytest.mark.anyio
async def test_prompt_is_built_from_the_prompt_files(tmp_path: Path) -> None:
    prompt = WorkspacePrompt(write_workspace(tmp_path / "ws"), extra="Answer in English.")
    text = await prompt.system_prompt()
    # HEARTBEAT.md is the heartbeat's, MEMORY.md the memory manager's.
    assert text == "I am calm.\n\nUse tools.\n\nOwner: Ada.\n\nAnswer in English."


@pytest.mark.anyio
async def test_prompt_follows_edits_and_caches_in_between(tmp_path: Path) -> None:
    workspace = write_workspace(tmp_path / "ws")
    prompt = WorkspacePrompt(workspace)
    with capture_logs() as logs:
        first = await prompt.system_prompt()
        assert await prompt.system_prompt() == first
        assert loads(logs) == 1

        user = workspace / "USER.md"
        user.write_text("Owner: Ada Lovelace.\n")
        os.utime(user, ns=(1, 1))  # a different mtime even on coarse clocks
        edited = await prompt.system_prompt()
        assert "Owner: Ada Lovelace." in edited
        assert loads(logs) == 2

        prompt.invalidate()
        assert await prompt.system_prompt() == edited
        assert loads(logs) == 3

        (workspace / "SOUL.md").unlink()
        assert (await prompt.system_prompt()).startswith("Use tools.")


@pytest.mark.anyio
async def test_prompt_falls_back_when_the_workspace_is_empty(tmp_path: Path) -> None:
    prompt = WorkspacePrompt(tmp_path / "missing", fallback="You are squidd.")
    assert await prompt.system_prompt() == "You are squidd."


@pytest.mark.anyio
async def test_huge_prompt_file_is_truncated(tmp_path: Path) -> None:
    workspace = write_workspace(tmp_path / "ws")
    (workspace / "AGENTS.md").write_text("x" * 50)
    text = await WorkspacePrompt(workspace, max_file_chars=10).system_prompt()
    assert "x" * 10 + "\n[AGENTS.md truncated]" in text
    assert "x" * 11 not in text
