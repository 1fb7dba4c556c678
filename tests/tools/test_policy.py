"""Tool policy per channel and session, from the config file, and its `config check` lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.config import ConfigError, load_settings
from squidd.core.models import SessionId
from squidd.tools.policy import ConfiguredToolPolicy
from tests.support.cli import config_check
from tests.support.config import write_config

CONFIG = """
[tools.shell]
enabled = true
[[tools.policy.rules]]
channel = "terminal"
allow = ["shell"]
[[tools.policy.rules]]
channel = "matrix"
session = "!dm:example.org"
allow = ["shell"]
[[tools.policy.rules]]
channel = "email"
deny = ["write_file", "edit_file", "shell"]
[[tools.policy.rules]]
channel = "cron"
deny = ["*"]
allow = ["read_file"]
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    return path


@pytest.mark.parametrize(
    ("tool", "channel", "session", "allowed"),
    [
        ("shell", "terminal", "terminal:default", True),
        ("shell", "matrix", "!dm:example.org", True),
        ("shell", "matrix", "!group:example.org", False),
        ("shell", "email", "me@example.org", False),
        ("shell", "cron", "cron:daily", False),
        ("shell", "heartbeat", "heartbeat", False),
        ("write_file", "email", "me@example.org", False),
        ("read_file", "email", "me@example.org", True),
        ("write_file", "matrix", "!group:example.org", True),
        ("read_file", "cron", "cron:daily", False),  # deny wins within one rule
        ("web_fetch", "cron", "cron:daily", False),
    ],
)
def test_rules_from_the_config_file(
    config: Path, tool: str, channel: str, session: str, allowed: bool
) -> None:
    policy = ConfiguredToolPolicy.from_settings(load_settings(config).tools)
    assert policy.allows(tool, channel, SessionId(session)) is allowed


def test_default_refuses_only_the_shell() -> None:
    policy = ConfiguredToolPolicy.from_settings(load_settings(Path("/dev/null")).tools)
    for channel in ("terminal", "matrix", "email", "cron", "heartbeat"):
        assert not policy.allows("shell", channel, SessionId("x"))
        assert policy.allows("read_file", channel, SessionId("x"))


def test_rule_without_allow_or_deny_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[tools.policy.rules]]\nchannel = "email"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert "tools.policy.rules.0" in str(caught.value)


def test_config_check_shows_the_policy(config: Path) -> None:
    result = config_check(config)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    terminal = "terminal: read_file, write_file, edit_file, list_dir, read_skill, web_fetch, shell"
    assert terminal in out
    assert "email: read_file, list_dir, read_skill, web_fetch" in out
    assert "(refused: write_file, edit_file, shell)" in out
    assert "rule 2: channel matrix, session !dm:example.org, allow shell" in out
    assert "allow_private_addresses_test_only" not in out


def test_config_check_warns_about_the_test_only_switch(tmp_path: Path) -> None:
    switch = {"tools.web_fetch": {"allow_private_addresses_test_only": True}}
    path = write_config(tmp_path / "config.toml", switch)
    result = config_check(path)
    assert result.returncode == 0, result.stderr
    assert "warning:   tools.web_fetch.allow_private_addresses_test_only is on" in result.stdout
