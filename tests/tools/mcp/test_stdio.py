"""The stdio transport's reader: linear in a huge line, bounded in memory, a line over the
limit refused with a clear error for the call it answered, and odd text (lone surrogate
escapes, NUL, controls) from a real subprocess server reaching the model as valid text."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from squidd.text import clean_text
from squidd.tools.mcp.stdio import LineSplitter, LineTooLong, parse_message
from tests.tools.mcp.servers import bad_server, supervised_hub

pytestmark = pytest.mark.anyio


def _valid(text: str) -> bool:
    text.encode("utf-8")
    return not any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text)


def test_lines_are_split_across_chunks() -> None:
    lines = LineSplitter(100)
    assert lines.feed(b'{"a"') == []
    assert lines.feed(b': 1}\n{"b": 2}\n{"c"') == [b'{"a": 1}', b'{"b": 2}']
    assert lines.feed(b": 3}\n") == [b'{"c": 3}']
    assert lines.held == 0


def test_a_line_over_the_limit_is_dropped_as_it_comes_and_reported_once() -> None:
    lines = LineSplitter(1000)
    head = b'{"jsonrpc": "2.0", "id": 7, "result": "'
    assert lines.feed(head) == []
    most = 0
    for _ in range(500):  # 32 MB in 64 KiB reads, no newline yet
        assert lines.feed(b"x" * 65536) == []
        most = max(most, lines.held)
    assert most <= 1000 + 65536  # memory bounded by the limit plus one read
    [refused, after] = lines.feed(b'"}\n{"jsonrpc": "2.0", "id": 8, "result": {}}\n')
    assert isinstance(refused, LineTooLong)
    assert refused.size == len(head) + 500 * 65536 + 2
    assert refused.head.startswith(head)
    assert after == b'{"jsonrpc": "2.0", "id": 8, "result": {}}'


def test_a_line_with_a_lone_surrogate_escape_is_read_as_valid_text() -> None:
    content = [{"type": "text", "text": "a\ud800b\x00c"}]
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": content}}).encode()
    message = parse_message(line)
    assert not isinstance(message, Exception)
    result = message.message.model_dump()
    assert result["result"]["content"][0]["text"] == "a\ufffdbc"
    assert isinstance(parse_message(b"not json {{"), Exception)


async def test_a_huge_line_from_a_real_server_fails_its_call_with_a_clear_error() -> None:
    server = bad_server(max_message_bytes=1_000_000, env={"BAD_SERVER_HUGE_BYTES": "3000000"})
    with capture_logs() as logs:
        async with supervised_hub(server) as (hub, _):
            tools = {tool.name: tool for tool in hub.tools()}
            result = await tools["bad__huge"].execute({})
            assert result.is_error
            assert "over the limit of 1000000 bytes (max_message_bytes)" in result.content
            assert "did not answer" not in result.content  # not a timeout: said at once
            # the connection stays usable
            assert (await tools["bad__ping"].execute({})).content == "pong"
    [refused] = [e for e in logs if e["event"] == "mcp_server_message_too_large"]
    assert refused["server"] == "bad" and refused["limit"] == 1_000_000
    assert refused["bytes"] > 3_000_000 and refused["answered"] is True


async def test_odd_text_from_a_real_server_reaches_the_model_as_valid_text() -> None:
    async with supervised_hub(bad_server()) as (hub, _):
        tools = {tool.name: tool for tool in hub.tools()}
        odd, broken = tools["bad__odd"], tools["bad__broken"]
        assert odd.description == "[bad] odd \ufffd text[2J everywhere"
        assert odd.parameters["properties"]["q"]["description"] == "a \ufffd b"
        result = await odd.execute({})
        failed = await broken.execute({})
    expected = "res\ufffdult café[31m red \U0001f600"
    assert not result.is_error and result.content == expected
    assert failed.is_error and failed.content == f"bad__broken failed: {expected}"
    assert all(_valid(text) for text in (result.content, failed.content, odd.description))


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_any_bytes_split_into_lines_that_join_back_and_parse_without_raising(
    chunks: list[bytes],
) -> None:
    lines = LineSplitter(200)
    items = [item for chunk in chunks for item in lines.feed(chunk)]
    data = b"".join(chunks)
    complete = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1] if b"\n" in data else []
    assert [i.size if isinstance(i, LineTooLong) else len(i) for i in items] == [
        len(line) for line in complete
    ]
    assert [i for i in items if isinstance(i, bytes)] == [c for c in complete if len(c) <= 200]
    assert lines.held <= 200 + 300
    for item in items:
        if isinstance(item, bytes):
            parse_message(item)  # a message or the exception saying why not, never a raise


@given(st.text(st.characters(exclude_categories=())))
def test_any_text_in_a_json_rpc_answer_reads_as_valid_text(text: str) -> None:
    content = [{"type": "text", "text": text}]
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": content}})
    message = parse_message(line.encode("utf-8", "surrogatepass"))
    assert not isinstance(message, Exception)
    read = message.message.model_dump()["result"]["content"][0]["text"]
    read.encode("utf-8")  # no lone surrogate; the controls go where the result is rendered
    assert clean_text(read) == clean_text(text)
