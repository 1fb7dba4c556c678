"""The Matrix channel's pure parts: rendering and splitting, the answer policy, the sync
ledger that decides when the position may advance, and the settings' checks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from squidd.channels.matrix.policy import Policy, mentions_bot
from squidd.channels.matrix.render import (
    message_content,
    render_html,
    split_markdown,
    strip_reply_fallback,
)
from squidd.channels.matrix.state import MatrixFiles, SyncLedger
from squidd.config.matrix import MatrixSettings

BOT = "@squidd:example.org"


# --- rendering --------------------------------------------------------------------------


def test_markdown_renders_and_raw_html_is_escaped() -> None:
    html = render_html("# Title\n\n*it* <img src=x onerror=alert(1)> [l](javascript:alert(1))")
    assert "<h1>Title</h1>" in html
    assert "<em>it</em>" in html
    assert "<img" not in html
    assert 'href="javascript' not in html


def test_plain_text_has_no_formatted_body() -> None:
    assert message_content("just words") == {"msgtype": "m.text", "body": "just words"}
    rich = message_content("a **b**")
    assert rich["format"] == "org.matrix.custom.html"
    assert rich["body"] == "a **b**"


def test_split_keeps_everything_within_the_limit() -> None:
    text = "\n\n".join(f"paragraph {i} " + "word " * 50 for i in range(100))
    pieces = split_markdown(text, 2_000)
    assert len(pieces) > 1
    assert all(len(p.encode()) <= 2_000 for p in pieces)
    assert " ".join(pieces).split() == text.split()


def test_split_cuts_a_single_long_line_and_multibyte_text() -> None:
    text = "ä" * 5_000  # 10 000 bytes, no spaces, no newlines
    pieces = split_markdown(text, 1_000)
    assert all(len(p.encode()) <= 1_000 for p in pieces)
    assert "".join(pieces) == text


def test_split_inside_a_code_fence_closes_and_reopens_it() -> None:
    code = "```python\n" + "\n".join(f"x = {i}" for i in range(400)) + "\n```"
    pieces = split_markdown(code, 1_000)
    assert len(pieces) > 1
    for piece in pieces:
        assert piece.count("```") % 2 == 0, piece[:40]
        assert "<pre>" in render_html(piece)


def test_reply_fallback_is_stripped() -> None:
    body = "> <@alice:example.org> the question\n> second line\n\nthe answer"
    assert strip_reply_fallback(body) == "the answer"
    assert strip_reply_fallback("no quote") == "no quote"


# --- policy -----------------------------------------------------------------------------


def policy(**kwargs: list[str]) -> Policy:
    return Policy.build(
        BOT,
        allowed_users=kwargs.get("users", ["@alice:example.org"]),
        allowed_servers=kwargs.get("servers", []),
        allowed_rooms=kwargs.get("rooms", []),
        open_rooms=kwargs.get("open", []),
    )


def decide(p: Policy, sender: str, body: str, members: int, room: str = "!r", **extra: object):
    content = {"msgtype": "m.text", "body": body, **extra}
    return p.decide(
        room_id=room,
        sender=sender,
        msgtype=str(content["msgtype"]),
        content=content,
        member_count=members,
        display_names=["Squiddy"],
    )


def test_policy_direct_chats_group_rooms_and_senders() -> None:
    p = policy(servers=["trusted.org"])
    assert decide(p, "@alice:example.org", "hi", 2).answer
    assert decide(p, "@bob:trusted.org", "hi", 2).answer
    assert not decide(p, "@mallory:example.org", "hi", 2).answer
    assert not decide(p, BOT, "hi", 2).answer
    assert not decide(p, "@alice:example.org", "hi", 2, msgtype="m.notice").answer
    assert not decide(p, "@alice:example.org", "hi all", 3).answer
    assert decide(p, "@alice:example.org", "hi squiddy!", 3).answer
    assert not decide(p, "@alice:example.org", "hi squiddyish", 3).answer
    assert decide(p, "@alice:example.org", f"{BOT}: hi", 3).answer
    assert decide(p, "@alice:example.org", "hi", 3, **{"m.mentions": {"user_ids": [BOT]}}).answer


def test_policy_never_answers_the_daemons_other_accounts() -> None:
    other = "@planner:trusted.org"
    p = Policy.build(
        BOT,
        allowed_users=[],
        allowed_servers=["trusted.org"],
        allowed_rooms=[],
        open_rooms=["!open"],
        siblings=[BOT, other],
    )
    assert decide(p, "@bob:trusted.org", "hi", 3, room="!open").answer
    refused = decide(p, other, "hi", 3, room="!open")
    assert not refused.answer and refused.reason == "another bot account of this daemon"
    assert not p.invite_accepted(other)
    assert decide(p, BOT, "hi", 2).reason == "own message"


def test_policy_room_lists() -> None:
    p = policy(rooms=["!ok"], open=["!open"])
    assert not decide(p, "@alice:example.org", "squiddy hi", 3, room="!other").answer
    assert decide(p, "@alice:example.org", "squiddy hi", 3, room="!ok").answer
    assert decide(p, "@alice:example.org", "no mention", 3, room="!open").answer
    assert decide(p, "@alice:example.org", "a direct chat", 2, room="!other").answer


def test_mention_needs_the_bot_not_someone_else() -> None:
    content = {"body": "hey", "m.mentions": {"user_ids": ["@bob:example.org"]}}
    assert not mentions_bot(content, BOT, ["Squiddy"])


# --- sync ledger --------------------------------------------------------------------------


def saving_into(saved: list[str]) -> Callable[[str], Awaitable[None]]:
    """A ledger's save: each position saved is appended to `saved`."""

    async def save(token: str) -> None:
        saved.append(token)

    return save


@pytest.mark.anyio
async def test_position_advances_only_past_fully_acked_batches() -> None:
    saved: list[str] = []
    ledger = SyncLedger(saving_into(saved))
    b1 = ledger.open("t1")
    ledger.add(b1, "$a")
    await ledger.seal(b1)
    b2 = ledger.open("t2")
    ledger.add(b2, "$b")
    await ledger.seal(b2)
    b3 = ledger.open("t3")
    await ledger.seal(b3)
    assert saved == []
    await ledger.ack(b2, "$b")  # a later batch done first: still blocked by b1
    assert saved == []
    await ledger.ack(b1, "$a")
    assert saved == ["t3"]


@pytest.mark.anyio
async def test_an_abandoned_batch_never_saves_its_position() -> None:
    saved: list[str] = []
    ledger = SyncLedger(saving_into(saved))
    b1 = ledger.open("t1")
    ledger.add(b1, "$a")
    await ledger.abandon(b1)
    await ledger.ack(b1, "$a")
    assert saved == []
    b2 = ledger.open("t2")
    await ledger.seal(b2)
    assert saved == ["t2"]


@pytest.mark.anyio
async def test_sync_position_file_is_per_account(tmp_path: Path) -> None:
    files = MatrixFiles(tmp_path)
    await files.prepare()
    await files.save_sync_token("@a:x", "s1")
    assert await files.load_sync_token("@a:x") == "s1"
    assert await files.load_sync_token("@b:x") is None
    files.sync_path.write_text("{not json")
    assert await files.load_sync_token("@a:x") is None


def test_store_name_cannot_escape_its_directory() -> None:
    name = MatrixFiles.store_name("@../../etc/passwd:x", "../DEV")
    assert "/" not in name
    assert not name.startswith(".")


# --- settings -----------------------------------------------------------------------------


def test_settings_require_credentials_and_valid_ids() -> None:
    with pytest.raises(ValidationError, match="access_token"):
        MatrixSettings(enabled=True, homeserver="https://m.example.org")
    with pytest.raises(ValidationError, match="user_id is required"):
        MatrixSettings(enabled=True, homeserver="https://m.example.org", password="pw")
    with pytest.raises(ValidationError, match="full Matrix user id"):
        MatrixSettings(allowed_users=["alice"])
    with pytest.raises(ValidationError, match="room id"):
        MatrixSettings(allowed_rooms=["general"])
    ok = MatrixSettings(
        enabled=True,
        homeserver="https://m.example.org/",
        access_token="syt_secret_value_123",
        allowed_rooms=["!abc", "#room:example.org"],
    )
    assert ok.homeserver == "https://m.example.org"
    assert "syt_secret_value_123" not in repr(ok)


@pytest.mark.anyio
async def test_a_closed_client_makes_no_new_http_session() -> None:
    """nio opens a session for any call that finds none: after `close`, a late call (a task
    still ending as its channel stops) is refused instead, and no session is left open."""
    from squidd.channels.matrix.client import SquiddClient
    from squidd.errors import DeliveryError

    client = SquiddClient("http://127.0.0.1:9", "@bot:example.org")
    client.access_token = "t"
    await client.close()
    with pytest.raises(DeliveryError, match="not connected"):
        await client.whoami()
    await client.close()  # again: nothing to close
    assert client.client_session  # still the closed stand-in, no session of aiohttp's
    assert type(client.client_session).__name__ == "_ClosedSession"


@pytest.mark.anyio
async def test_a_closed_identity_api_leaves_no_session_open() -> None:
    """A late request after `close` still goes out, through a session of its own that is
    closed with it."""
    from squidd.channels.matrix.identity.api import MatrixApi
    from squidd.errors import TransientError

    api = MatrixApi("http://127.0.0.1:9", "@bot:example.org", "t", timeout_s=5)
    await api.close()
    with pytest.raises(TransientError, match="unreachable"):
        await api.request("asking", "GET", "/account/whoami")
    assert api._session is None  # nothing kept open
