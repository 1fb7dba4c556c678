"""The allowlist both channels share: exact ids, whole domains, never the channel itself."""

from __future__ import annotations

from squidd.channels.email.policy import is_allowed
from squidd.channels.matrix.policy import Policy, server_of
from squidd.core.allowlist import Allowlist


def test_ids_and_domains_and_never_itself() -> None:
    allow = Allowlist.of(
        ["@alice:example.org", "@bot:friends.org"],
        ["Friends.org"],
        domain_of=server_of,
        own="@bot:friends.org",
    )
    assert allow.allows("@alice:example.org")
    assert allow.allows("@carol:FRIENDS.org")  # domains compare in lowercase
    assert not allow.allows("@bot:friends.org")  # listed, and its server too: still never
    assert not allow.allows("@mallory:example.org")
    assert not allow.allows("@Alice:example.org")  # MXIDs are kept as written
    assert not allow.allows("")


def test_empty_lets_nobody_in() -> None:
    nobody = Allowlist.of([], [], domain_of=lambda a: a.rpartition("@")[2], fold=str.lower)
    assert not nobody.allows("alice@example.org")
    assert not nobody.allows("")


def test_folding_ids_and_subdomains_not_included() -> None:
    allow = Allowlist.of(
        ["Alice@Example.org"],
        ["friends.org"],
        domain_of=lambda a: a.rpartition("@")[2],
        fold=str.lower,
    )
    assert allow.allows("ALICE@example.ORG")
    assert allow.allows("bob@friends.org")
    assert not allow.allows("bob@mail.friends.org")


def test_both_channels_decide_through_it() -> None:
    policy = Policy.build(
        "@bot:example.org",
        allowed_users=["@alice:example.org"],
        allowed_servers=["friends.org"],
        allowed_rooms=[],
        open_rooms=[],
    )
    assert policy.user_allowed("@alice:example.org")
    assert policy.user_allowed("@zed:friends.org")
    assert not policy.user_allowed("@bot:example.org")
    assert is_allowed("Alice@Example.org", ["alice@example.org"], [])
    assert is_allowed("x@friends.org", [], ["friends.org"])
    assert not is_allowed("x@mail.friends.org", [], ["friends.org"])
