"""Which memory scope "auto" chooses: per person as soon as more than one person may talk
to the assistant; one person's ids joined by `[[people]]` count once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.config import Settings
from squidd.core.models import Inbound, InboundKind, SessionId
from squidd.gateway.people import People, Speaker, memory_scope

MATRIX = {
    "enabled": True,
    "homeserver": "http://127.0.0.1:9",
    "user_id": "@bot:example.org",
    "password": "not-a-real-password",
}
EMAIL = {
    "enabled": True,
    "address": "bot@example.org",
    "imap_host": "127.0.0.1",
    "smtp_host": "127.0.0.1",
    "username": "bot",
    "password": "not-a-real-password",
    "trusted_authserv_id": "mx.example.org",
}


def settings(tmp_path: Path, **sections: Any) -> Settings:
    return Settings(storage={"data_dir": str(tmp_path)}, **sections)


@pytest.mark.parametrize(
    ("sections", "scope"),
    [
        ({}, "shared"),
        ({"matrix": {**MATRIX, "allowed_users": ["@alice:example.org"]}}, "shared"),
        (
            {"matrix": {**MATRIX, "allowed_users": ["@alice:example.org", "@bob:example.org"]}},
            "person",
        ),
        ({"matrix": {**MATRIX, "allowed_servers": ["example.org"]}}, "person"),
        (
            {
                "matrix": {**MATRIX, "allowed_users": ["@alice:example.org"]},
                "email": {**EMAIL, "allowed_senders": ["alice@example.org"]},
                "people": [{"name": "alice", "ids": ["@alice:example.org", "alice@example.org"]}],
            },
            "shared",
        ),
        (
            {
                "matrix": {**MATRIX, "allowed_users": ["@alice:example.org"]},
                "email": {**EMAIL, "allowed_senders": ["alice@example.org"]},
            },
            "person",
        ),
        (
            {"agents": {"memory_scope": "shared"}, "people": [{"name": "a"}, {"name": "b"}]},
            "shared",
        ),
        ({"agents": {"memory_scope": "person"}}, "person"),
    ],
)
def test_auto_chooses_per_person_for_more_than_one(
    tmp_path: Path, sections: dict[str, Any], scope: str
) -> None:
    assert memory_scope(settings(tmp_path, **sections)) == scope


@pytest.mark.parametrize("kind", ["matrix", "email"])
def test_auto_counts_the_people_of_an_agents_own_account(tmp_path: Path, kind: str) -> None:
    """`[matrix]` (or `[email]`) off, only an agent's own account runs, with `[matrix]`'s
    allowlist (a whole homeserver, a whole domain): its conversations are many people's,
    so each person's memory stays their own."""
    if kind == "matrix":
        template = {**MATRIX, "enabled": False, "allowed_servers": ["example.org"]}
        own = {"user_id": "@work:example.org", "password": "not-a-real-password"}
    else:
        template = {**EMAIL, "enabled": False, "allowed_domains": ["example.org"]}
        own = {"address": "work@example.org", "password": "not-a-real-password"}
    config = settings(
        tmp_path,
        **{kind: template},
        agents={"list": [{"name": "home"}, {"name": "work", kind: own}]},
    )
    assert memory_scope(config.for_agent("work")) == "person"
    assert memory_scope(config) == "person"


def test_speakers_of_each_kind_of_turn(tmp_path: Path) -> None:
    people = People(
        settings(
            tmp_path,
            agents={"memory_scope": "person"},
            people=[{"name": "alice", "ids": ["@Alice:example.org", "alice@example.org"]}],
        )
    )

    def inbound(sender: str, *, group: bool = False, kind: InboundKind = InboundKind.MESSAGE):
        return Inbound("memory", "id", SessionId("s"), sender, "hi", group=group, kind=kind)

    assert people.speaker(inbound("ALICE@example.org")) == Speaker("alice", "alice")
    assert people.speaker(inbound("@alice:example.org", group=True)) == Speaker("alice", None)
    carol = "@carol:example.org"
    assert people.speaker(inbound(carol)) == Speaker(carol, carol)
    assert people.speaker(inbound("", kind=InboundKind.CRON)) == Speaker()
    assert people.speaker(inbound("x", kind=InboundKind.HEARTBEAT)) == Speaker()
