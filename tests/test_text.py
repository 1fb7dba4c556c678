"""Text hygiene: a lone surrogate or a NUL in a message (an encrypted Matrix event the
homeserver could not check, a model's `\\ud800` escape, a tool's odd output) never crashes a
turn, never keeps a message out of the history, and never reaches the model's request."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from squidd.core.models import Inbound, Message, SessionId, TextDelta, ToolCall
from squidd.fs import atomic_write_text
from squidd.store.jsonl import JsonlStore
from squidd.text import clean_text, decode_bytes, utf8
from tests.core.test_agent import make_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.router import Collect, Records, build_router

pytestmark = pytest.mark.anyio

LONE = "\ud800"
BAD = f"hello {LONE} and a nul \x00 end"
CLEAN = "hello \ufffd and a nul  end"
# Any code point, lone surrogates and controls included (hypothesis leaves surrogates out
# unless asked).
ANY_CHAR = st.characters(exclude_categories=())


def test_clean_text_replaces_lone_surrogates_drops_controls_and_joins_pairs() -> None:
    assert clean_text(BAD) == CLEAN
    assert clean_text("\ud83d\ude00") == "\U0001f600"  # a pair is the character it encodes
    assert clean_text("\ude00\ud83d") == "\ufffd\ufffd"  # reversed: two lone halves
    assert clean_text("plain ä 😀\tcol\r\nline") == "plain ä 😀\tcol\r\nline"
    assert clean_text("a\x00b\x1b[31mc\x7fd\x85e\x9ff") == "ab[31mcdef"
    assert utf8(f"x{LONE}") == "x\ufffd".encode()


def test_surrogate_escapes_are_decoded_as_utf8_then_cp1252() -> None:
    """What `errors="surrogateescape"` made of raw bytes (the email parser's 8-bit headers,
    a file name from the file system) reads as the text it was."""
    assert clean_text(b"caf\xc3\xa9".decode("ascii", "surrogateescape")) == "café"
    assert clean_text(b"caf\xe9 \x80".decode("ascii", "surrogateescape")) == "café €"
    # 0x81 is undefined in cp1252: Latin-1 makes it a C1 control, which is dropped.
    assert clean_text(b"a\x81b\xff".decode("utf-8", "surrogateescape")) == "abÿ"
    # A high surrogate before an escaped byte is a pair, not an escape.
    assert clean_text("\ud800\udc80") == "\U00010080"
    assert decode_bytes(b"\xff\xfe caf\xc3\xa9") == "ÿþ café"


@given(st.text(ANY_CHAR))
def test_clean_text_of_any_string_is_valid_text(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")  # never raises
    assert not any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in cleaned)
    assert clean_text(cleaned) == cleaned  # cleaning twice changes nothing
    if text.isprintable():
        assert cleaned == text  # printable text is left alone


@given(st.binary())
def test_any_bytes_read_with_surrogateescape_become_valid_text(data: bytes) -> None:
    cleaned = clean_text(data.decode("utf-8", "surrogateescape"))
    cleaned.encode("utf-8")
    try:
        expected = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    assert cleaned == clean_text(expected)  # valid UTF-8 reads as itself


async def test_every_channel_hands_the_router_clean_text() -> None:
    """The inbox every channel gets cleans the text and the ids that reach the stores."""
    seen: list[Inbound] = []

    async def turn(message: Inbound) -> str:
        seen.append(message)
        return "ok"

    records = Records()
    channel = Collect()
    router = build_router(turn, {"c": channel}, records=records)
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
