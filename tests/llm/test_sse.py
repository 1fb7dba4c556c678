"""The answer's server-sent events split by hand (llm/openai.py): line ends of every kind,
split anywhere between the server's writes, comments and keep-alives skipped, data on
several lines joined, and `[DONE]` ending the answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from squidd.core.models import TextDelta
from tests.llm.test_openai import HELLO, collect, llm_over, text_of

pytestmark = pytest.mark.anyio


def _chunk(text: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})


class _Pieces(httpx2.AsyncByteStream):
    """The body in the pieces the server wrote, each a separate read."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


async def _texts(pieces: list[bytes]) -> list[str]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Pieces(pieces)
        )

    events = await collect(llm_over(handler, max_retries=0).chat(HELLO, []))
    return [e.text for e in events if isinstance(e, TextDelta)]


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
async def test_every_line_end_split_at_every_byte(end: str) -> None:
    body = (
        f": a comment{end}"
        f"event: ping{end}{end}"  # a keep-alive without data
        f"data: {_chunk('Hel')}{end}{end}"
        f"id: 7{end}data:{_chunk('lo')}{end}{end}"
        f"data: [DONE]{end}{end}"
    ).encode()
    for cut in range(1, len(body)):
        assert await _texts([body[:cut], body[cut:]]) == ["Hel", "lo"], cut


async def test_data_on_several_lines_is_one_event() -> None:
    chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "two lines"}}]}, indent=1)
    lines = "".join(f"data: {line}\n" for line in chunk.splitlines())
    assert await _texts([f"{lines}\ndata: [DONE]\n\n".encode()]) == ["two lines"]


async def test_the_last_event_without_done_still_counts() -> None:
    body = f"data: {_chunk('no done')}\r\r".encode()
    events = await collect(
        llm_over(
            lambda request: httpx2.Response(200, stream=_Pieces([body[:-1], body[-1:]])),
            max_retries=0,
        ).chat(HELLO, [])
    )
    assert text_of(events) == "no done"
