"""`squidd status`: an agent whose own heartbeat is on is named with its next beat, also
when the daemon's `[heartbeat]` (the default agent's) is off."""

from __future__ import annotations

from squidd.commands.status import heartbeat_lines

NEXT = "2026-11-28T02:21:42+00:00"


def test_only_an_agents_own_heartbeat_is_on() -> None:
    doc = {"heartbeat": None, "heartbeats": {"heartbeat:planner": NEXT}}
    assert heartbeat_lines(doc) == ["heartbeat: off", f"heartbeat (planner): next {NEXT}"]


def test_the_default_and_another_agent_beat() -> None:
    doc = {"heartbeat": NEXT, "heartbeats": {"heartbeat": NEXT, "heartbeat:work": None}}
    assert heartbeat_lines(doc) == [f"heartbeat: next {NEXT}"]


def test_a_daemon_without_the_heartbeats_field() -> None:
    assert heartbeat_lines({"heartbeat": None}) == ["heartbeat: off"]
