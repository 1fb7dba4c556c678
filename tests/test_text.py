"""Text hygiene: a lone surrogate or a NUL in a message (an encrypted Matrix event the
homeserver could not check, a model's `\\ud800` escape, a tool's odd output) never crashes a
turn, never keeps a message out of the history, and never reaches the model's request."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from squidd.core.models import Inbound, Message, SessionId, TextDelta, ToolCall
from squidd.core.router import Router
from squidd.core.supervisor import Backoff, ChildHealth
from squidd.fs import atomic_write_text
from squidd.store.jsonl import JsonlStore
from squidd.text import clean_text, utf8
from tests.core.test_agent import make_loop
from tests.core.test_router import Collect, Records
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm

pytestmark = pytest.mark.anyio

LONE = "\ud800"
BAD = f"hello {LONE} and a nul \x00 end"
CLEAN = "hello \ufffd and a nul \ufffd end"


def test_clean_text_replaces_lone_surrogates_and_nul_and_joins_pairs() -> None:
    assert clean_text(BAD) == CLEAN
    assert clean_text("\ud83d\ude00") == "\U0001f600"  # a pair is the character it encodes
    assert clean_text("\ude00\ud83d") == "\ufffd\ufffd"  # reversed: two lone halves
    assert clean_text("plain ä 😀") == "plain ä 😀"
    assert utf8(f"x{LONE}") == "x\ufffd".encode()


async def test_every_channel_hands_the_router_clean_text() -> None:
    """The inbox every channel gets cleans the text and the ids that reach the stores."""
    seen: list[Inbound] = []

    async def turn(message: Inbound) -> str:
        seen.append(message)
        return "ok"

    records = Records()
    health: dict[str, ChildHealth] = {}
    channel = Collect()
    router = Router(
        run_turn=turn,
        channels={"c": channel},
        handled=records,
        outbox=records,
        health_of=lambda name: health.setdefault(name, ChildHealth(name)),
        max_concurrent_turns=2,
        delivery_backoff=Backoff(0.01, 0.01),
    )
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.inbox("c").put(
            Inbound(
                "c",
                f"id{LONE}",
                SessionId(f"s{LONE}"),
                f"u{LONE}",
                BAD,
                meta={"subject": f"re {LONE}", "n": 3},
            )
        )
        with anyio.fail_after(5):  # a guard against hanging, not a timing assertion
            while not channel.sent:  # noqa: ASYNC110 - polls state that has no event
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    [message] = seen
    assert message.text == CLEAN
    assert (message.source_id, message.session_id, message.sender) == (
        "id\ufffd",
        "s\ufffd",
        "u\ufffd",
    )
    assert message.meta == {"subject": "re \ufffd", "n": 3}
    assert records.handled == {("c", "id\ufffd")}


async def test_the_store_never_fails_on_a_lone_surrogate(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session = SessionId("s")
    await store.append_messages(session, [Message(role="assistant", content=BAD)])
    window = await store.load_window(session)
    # The lone surrogate is replaced; the NUL is valid UTF-8 (JSON escapes it) and stays.
    assert [m.content for m in window.messages] == ["hello \ufffd and a nul \x00 end"]
    atomic_write_text(tmp_path / "summary.md", f"summary {LONE}")
    assert (tmp_path / "summary.md").read_text() == "summary \ufffd"


async def test_model_output_with_a_lone_surrogate_escape_is_cleaned() -> None:
    # The scripted server writes the reply with json.dumps: the lone surrogate goes over the
    # wire as the JSON escape `\ud800`, as a real endpoint may send it.
    llm, _mock = scripted_llm(Reply(content=f"bad {LONE} text"))
    events = [event async for event in llm.chat([Message(role="user", content="hi")], [])]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "bad \ufffd text"


async def test_a_lone_surrogate_in_the_history_does_not_break_the_request() -> None:
    llm, mock = scripted_llm(Reply(content="fine"))
    history = [
        Message(role="user", content=f"read it {LONE}"),
        Message(
            role="assistant",
            tool_calls=(ToolCall("call_1", "read_file", '{"path": "x"}'),),
        ),
        Message(role="tool", content=f"bytes {LONE}", tool_call_id="call_1"),
    ]
    events = [event async for event in llm.chat(history, [])]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "fine"
    sent = mock.requests[0]["messages"]
    assert sent[0]["content"] == "read it \ufffd"
    assert sent[2]["content"] == "bytes \ufffd"


async def test_a_turn_keeps_the_user_message_when_the_text_was_odd(tmp_path: Path) -> None:
    """Model output with a lone surrogate is stored and answered, not a crash."""
    loop, store, _mock = make_loop(JsonlStore(tmp_path), Reply(content=f"answer {LONE}"))
    reply = await loop.run(SessionId("s"), clean_text(BAD), "test")
    assert reply == "answer \ufffd"
    window = await store.load_window(SessionId("s"))
    assert [m.content for m in window.messages] == [CLEAN, "answer \ufffd"]
