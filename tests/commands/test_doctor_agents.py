"""`squidd doctor`'s agent lines: each agent's workspace, chain and routes; a workspace
that cannot be made, or a route no message can take, is a ✗ with the fix."""

from __future__ import annotations

from pathlib import Path

from squidd.config import Settings
from squidd.ops.doctor.agents import agent_checks

EMAIL = {
    "enabled": True,
    "address": "bot@example.org",
    "imap_host": "127.0.0.1",
    "smtp_host": "127.0.0.1",
    "password": "not-a-real-password",
    "trusted_authserv_id": "mx.example.org",
}


def test_each_agent_gets_a_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "SOUL.md").write_text("I keep the home.")
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    settings = Settings(
        storage={"data_dir": str(tmp_path / "data")},
        email=EMAIL,
        agents={
            "list": [
                {"name": "home", "workspace": str(home)},
                {"name": "work", "addresses": ["bot+work@example.org"]},
                {"name": "lost", "addresses": ["someone@else.org"]},
                {"name": "blocked", "workspace": str(blocked)},
                {"name": "rooms", "rooms": ["!abc:example.org"]},
            ]
        },
    )
    checks = {c.name: c for c in agent_checks(settings)}
    assert not checks["agent home (default)"].failed
    assert "its SOUL.md" in checks["agent home (default)"].detail
    work = checks["agent work"]
    assert not work.failed and "the built-in prompt" in work.detail
    assert str(tmp_path / "data" / "agents" / "work" / "workspace") in work.detail
    assert checks["agent lost"].failed and "no mail reaches it" in checks["agent lost"].detail
    assert checks["agent blocked"].failed and "not a directory" in checks["agent blocked"].detail
    assert "Matrix is off" in checks["agent rooms"].detail


def test_one_agent_has_no_lines(tmp_path: Path) -> None:
    assert agent_checks(Settings(storage={"data_dir": str(tmp_path)})) == []


def test_a_heartbeat_to_a_channel_that_does_not_run_is_a_fail(tmp_path: Path) -> None:
    """With only the planner's own account on, `matrix:` (or a typo of `matrix-planner`)
    reaches no one: the line says which channels run; the right target passes."""
    own = {"user_id": "@planner:example.org", "password": "not-a-real-password"}

    def planner_beating_to(target: str) -> Settings:
        return Settings(
            storage={"data_dir": str(tmp_path / "data")},
            matrix={"homeserver": "http://127.0.0.1:9"},
            agents={
                "list": [
                    {"name": "home"},
                    {
                        "name": "planner",
                        "matrix": own,
                        "heartbeat": {"enabled": True, "target": target},
                    },
                ]
            },
        )

    for target in ("matrix:!a:example.org", "matrix-plannr:!a:example.org"):
        [_, planner] = agent_checks(planner_beating_to(target))
        assert planner.failed, target
        assert "running: matrix-planner" in planner.detail and target in planner.detail
        assert "matrix-<agent>" in (planner.fix or "")
    [_, planner] = agent_checks(planner_beating_to("matrix-planner:!a:example.org"))
    assert not planner.failed, planner.detail
