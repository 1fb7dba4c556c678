"""`squidd init`: a config and a workspace written once, never overwritten."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from squidd.config import load_settings
from squidd.workspace import WORKSPACE_FILES, template_text
from tests.support.config import write_config


def init(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SQUIDD_")}
    clean.pop("STATE_DIRECTORY", None)
    clean.update({"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")})
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-m", "squidd", *args, "init"],
        capture_output=True,
        text=True,
        env=clean,
        timeout=60,
        check=False,
    )


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        str(path.relative_to(root)): (
            path.read_bytes() if path.is_file() else b"",
            path.stat().st_mtime_ns,
            path.stat().st_mode,
        )
        for path in sorted(root.rglob("*"))
    }


def test_init_twice_changes_nothing_the_second_time(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "config.toml"
    first = init(tmp_path, "--config", str(config))
    assert first.returncode == 0, first.stderr
    workspace = tmp_path / "data" / "squidd" / "workspace"
    assert f"created  {config}" in first.stdout
    for name in WORKSPACE_FILES:
        assert f"created  {workspace / name}" in first.stdout
        assert (workspace / name).read_text() == template_text(name)
    example = workspace / "skills" / "example" / "SKILL.md"
    assert f"created  {example}" in first.stdout
    assert example.read_text() == template_text("skills/example/SKILL.md")
    assert config.read_text() == template_text("config.example.toml")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert "Next steps" in first.stdout
    assert f"squidd --config {config} chat" in first.stdout

    before = snapshot(tmp_path)
    second = init(tmp_path, "--config", str(config))
    assert second.returncode == 0, second.stderr
    assert "created" not in second.stdout
    assert "nothing to do" in second.stdout
    assert snapshot(tmp_path) == before


def test_init_never_overwrites_an_existing_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[llm]\nmodel = "my-model"\n')
    workspace = tmp_path / "data" / "squidd" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "USER.md").write_text("I am Ada.\n")
    result = init(tmp_path, "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert config.read_text() == '[llm]\nmodel = "my-model"\n'
    assert (workspace / "USER.md").read_text() == "I am Ada.\n"
    assert (workspace / "SOUL.md").read_text() == template_text("SOUL.md")
    assert "kept 2 existing file(s) unchanged: config.toml, USER.md" in result.stdout


def test_init_honours_the_workspace_of_an_existing_config(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", {"agents": {"workspace": tmp_path / "notes"}})
    assert init(tmp_path, "--config", str(config)).returncode == 0
    names = sorted(p.name for p in (tmp_path / "notes").iterdir())
    assert names == sorted([*WORKSPACE_FILES, "skills"])


def test_init_default_config_location(tmp_path: Path) -> None:
    result = init(tmp_path)
    assert result.returncode == 0, result.stderr
    config = tmp_path / "home" / ".config" / "squidd" / "config.toml"
    assert config.is_file()
    assert "squidd config check" in result.stdout
    from_env = tmp_path / "elsewhere.toml"
    assert init(tmp_path, SQUIDD_CONFIG=str(from_env)).returncode == 0
    assert from_env.is_file()


def test_init_with_a_broken_config_exits_2_and_writes_no_workspace(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", {"agents": {"keep_recent_ratio": 3}})
    result = init(tmp_path, "--config", str(config))
    assert result.returncode == 2
    assert "agents.keep_recent_ratio" in result.stderr
    assert not (tmp_path / "data").exists()


def test_written_config_loads_with_the_default_workspace(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    assert init(tmp_path, "--config", str(config)).returncode == 0
    settings = load_settings(config)
    assert settings.tools.shell.enabled is False
    assert settings.tools.policy.default_deny == ["shell"]
