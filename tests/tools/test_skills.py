"""Skills: the SKILL.md folders, their index in the prompt, read_skill, and bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from structlog.testing import capture_logs

from squidd.config import Settings
from squidd.core.models import SessionId
from squidd.errors import ToolError
from squidd.gateway.runtime import build_registry, build_runtime, build_skills
from squidd.store.jsonl import JsonlStore
from squidd.store.media import MediaStore
from squidd.store.tool_results import ToolResultFiles
from squidd.tools.skills import ReadSkillTool, SkillCatalog
from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM

pytestmark = pytest.mark.anyio


def write_skill(root: Path, folder: str, front: str, body: str = "Do the thing.") -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    return path


def test_index_is_sorted_bounded_and_lists_unavailable_skills(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "b", "name: weather\ndescription: Look up the weather.")
    write_skill(root, "a", "name: zebra\ndescription: Count zebras.")
    write_skill(
        root,
        "c",
        "name: deploy\ndescription: Deploy the site.\n"
        "requires:\n  bins: [no-such-binary-xyz]\n  env: [SQUIDD_TEST_NO_SUCH_VAR]",
    )
    catalog = SkillCatalog([root])
    text = catalog.index_text()
    assert text.splitlines()[2:] == [
        "- deploy: Deploy the site. (unavailable: needs bin:no-such-binary-xyz, "
        "env:SQUIDD_TEST_NO_SUCH_VAR)",
        "- weather: Look up the weather.",
        "- zebra: Count zebras.",
    ]
    assert "Do the thing" not in text  # bodies are read on demand
    assert SkillCatalog([root]).index_text() == text  # the same bytes every time
    small = SkillCatalog([root], max_index_chars=200).index_text()
    assert len(small) <= 200 + 60 and "3 skills in all" in small


def test_always_skills_are_inlined(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "x", "name: tone\ndescription: How to write.\nalways: true", "Be terse.")
    assert "### Skill: tone\nBe terse." in SkillCatalog([root]).index_text()


def test_bad_front_matter_is_skipped_with_a_warning_naming_the_file(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good", "name: good\ndescription: Fine.")
    bad_yaml = write_skill(root, "bad1", "name: [unclosed\ndescription: x")
    no_desc = write_skill(root, "bad2", "name: nodesc")
    (root / "bad3").mkdir()
    (root / "bad3" / "SKILL.md").write_text("no front matter at all", encoding="utf-8")
    with capture_logs() as logs:
        skills = SkillCatalog([root]).skills()
    assert [s.name for s in skills] == ["good"]
    skipped = {e["file"] for e in logs if e["event"] == "skill_skipped"}
    assert skipped == {str(bad_yaml), str(no_desc), str(root / "bad3" / "SKILL.md")}


def test_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "workspace" / "skills"
    outside = tmp_path / "elsewhere"
    write_skill(outside, "leak", "name: leak\ndescription: Reads secrets.")
    write_skill(root, "ok", "name: ok\ndescription: Fine.")
    root.joinpath("linked-folder").symlink_to(outside / "leak")
    (root / "linked-file").mkdir()
    (root / "linked-file" / "SKILL.md").symlink_to(outside / "leak" / "SKILL.md")
    with capture_logs() as logs:
        catalog = SkillCatalog([root])
        assert [s.name for s in catalog.skills()] == ["ok"]
    refused = {e["file"] for e in logs if e["event"] == "skill_refused"}
    assert refused == {
        str(root / "linked-folder" / "SKILL.md"),
        str(root / "linked-file" / "SKILL.md"),
    }
    with pytest.raises(ToolError, match="no skill named 'leak'"):
        catalog.read("leak")


def test_changes_are_seen_through_mtime_without_rereading_every_turn(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root, "a", "name: one\ndescription: First.")
    catalog = SkillCatalog([root])
    with capture_logs() as logs:
        catalog.skills()
        catalog.skills()
    assert [e["event"] for e in logs].count("skills_loaded") == 1
    path.write_text("---\nname: one\ndescription: Second version.\n---\nbody\n", encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert "Second version." in catalog.index_text()
    write_skill(root, "b", "name: two\ndescription: New.")
    assert [s.name for s in catalog.skills()] == ["one", "two"]


async def test_read_skill_returns_the_body_and_files_beside_it(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "a", "name: recipe\ndescription: Cook.", "Step one: boil water.")
    (root / "a" / "ingredients.txt").write_text("water", encoding="utf-8")
    tool = ReadSkillTool(SkillCatalog([root]))
    result = await tool.execute({"name": "recipe"})
    assert "Step one: boil water." in result.content
    assert "ingredients.txt" in result.content
    # A file name that is not UTF-8, or holds a line break or an escape sequence, is listed
    # as valid text on the one line.
    os.close(os.open(os.path.join(os.fsencode(root / "a"), b"caf\xe9\n\x1b[2J.txt"), os.O_CREAT))
    odd = (await tool.execute({"name": "recipe"})).content
    odd.encode("utf-8")
    assert "Files beside it (read with read_file): café [2J.txt, ingredients.txt" in odd
    with pytest.raises(ToolError, match="skills: recipe"):
        await tool.execute({"name": "nope"})


def runtime_settings(tmp_path: Path, **agents: object) -> Settings:
    return Settings.model_validate(
        {
            "storage": {"data_dir": str(tmp_path)},
            "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "main-model"},
            "agents": agents,
            "tools": {"skills": {"max_index_chars": 100_000}},
        }
    )


async def system_prompts(settings: Settings, turns: int) -> list[str]:
    mock = MockLLM(default=Reply(content="ok"))
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(mock.handler))
    runtime = build_runtime(settings, http_client=client)
    try:
        for n in range(turns):
            await runtime.agent.run(SessionId("s"), f"hello {n}", "terminal")
    finally:
        await runtime.aclose()
    return [request["messages"][0]["content"] for request in mock.requests]


async def test_the_runtime_puts_the_index_in_the_prompt_and_offers_read_skill(
    tmp_path: Path,
) -> None:
    settings = runtime_settings(tmp_path)
    write_skill(settings.workspace_dir / "skills", "a", "name: recipe\ndescription: Cook.")
    first, second = await system_prompts(settings, 2)
    assert first.endswith("- recipe: Cook.")
    assert second == first  # the same bytes every turn: the provider's prompt cache holds
    catalog = build_skills(settings)
    assert catalog is not None
    registry = build_registry(
        settings,
        JsonlStore(tmp_path),
        catalog,
        results=ToolResultFiles(tmp_path),
        media=MediaStore(tmp_path, lifetime_s=3600),
    )
    assert "read_skill" in [d.name for d in registry.definitions()]


async def test_the_index_is_held_to_its_own_prompt_cap(tmp_path: Path) -> None:
    # max_index_chars is set far above the token cap: agents.extra_prompt_tokens decides.
    settings = runtime_settings(tmp_path, extra_prompt_tokens=200)
    for n in range(60):
        write_skill(
            settings.workspace_dir / "skills",
            f"s{n:02}",
            f"name: skill{n:02}\ndescription: {'x' * 80}",
        )
    first, second = await system_prompts(settings, 2)
    assert "skill00" in first
    assert "skill59" not in first
    assert second == first


def test_init_writes_an_example_skill_that_skills_list_shows(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUIDD_")}
    env.update({"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")})
    config = tmp_path / "config.toml"

    def squidd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "squidd", "--config", str(config), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )

    assert squidd("init").returncode == 0
    listed = squidd("skills", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("daily-note  [usable]")
    assert "SKILL.md" in listed.stdout
