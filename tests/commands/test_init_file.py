"""The pieces of `squidd init --interactive` that need no server: the config edited in place
(comments kept, a secret moved to its file), the machine's timezone offered, and the next
commands written as they run (`scripts/squidd` in a checkout, `squidd` when installed)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from squidd.commands import init_ask, init_interactive
from squidd.commands.init_ask import Answers
from squidd.commands.init_file import render, write

EXISTING = """# mine
[llm]
# the endpoint I use
base_url = "http://127.0.0.1:1/v1"  # local
model = "m"
api_key = "inline-secret"

[cron]
enabled = true  # keep
"""


def test_a_part_is_set_in_place_and_the_rest_of_the_file_kept(tmp_path: Path) -> None:
    answers = Answers(
        sections={"": {"timezone": "Europe/Berlin"}, "llm": {"model": "other"}},
        secrets={"llm_api_key": "new-key"},
    )
    text = render(EXISTING, answers, tmp_path)
    for line in ("# mine", "# the endpoint I use", '"http://127.0.0.1:1/v1"  # local'):
        assert line in text
    assert "enabled = true  # keep" in text
    assert "inline-secret" not in text and "new-key" not in text
    data = tomllib.loads(text)
    assert data["timezone"] == "Europe/Berlin"  # at the top level, not inside [cron]
    assert data["llm"] == {
        "base_url": "http://127.0.0.1:1/v1",
        "model": "other",
        "api_key_file": str(tmp_path / "llm_api_key"),
    }


def test_the_secrets_and_the_config_are_written_private(tmp_path: Path) -> None:
    target = tmp_path / "etc" / "config.toml"
    answers = Answers(sections={"llm": {"model": "m"}}, secrets={"llm_api_key": "k"})
    written = write(target, render(None, answers, target.parent), answers)
    assert written == [target.parent / "llm_api_key", target]
    assert (target.parent / "llm_api_key").read_text() == "k\n"
    assert all(p.stat().st_mode & 0o077 == 0 for p in written)
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.toml", "llm_api_key"]


def test_the_machines_timezone_is_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", ":Asia/Tokyo")
    assert init_ask.machine_timezone() == "Asia/Tokyo"
    monkeypatch.setenv("TZ", "Not/AZone")
    assert init_ask.machine_timezone() != "Not/AZone"  # the next source, or UTC


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[storage]\ndata_dir = "{tmp_path / "data"}"\n[api]\nenabled = true\n')
    return path


def test_next_commands_in_a_checkout_run_its_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = init_interactive._checkout()
    assert root is not None  # these tests run from the source checkout
    config = _config(tmp_path)
    monkeypatch.chdir(root)
    text = init_interactive.next_commands(config, tmp_path / "default.toml")
    assert f"  scripts/squidd --config {config} doctor" in text
    assert "http://127.0.0.1:18461/" in text and str(tmp_path / "data" / "api" / "keys") in text
    monkeypatch.chdir(tmp_path)
    text = init_interactive.next_commands(config, config)  # the default config: no --config
    assert f"  {root / 'scripts' / 'squidd'} doctor" in text


def test_next_commands_when_installed_say_squidd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init_interactive, "_checkout", lambda: None)
    config = _config(tmp_path)
    text = init_interactive.next_commands(config, config)
    assert "  squidd doctor" in text and "  squidd run" in text
