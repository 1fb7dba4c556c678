"""The LLM adapter's error table: every exception class httpx2 defines is in it (a new
library version that adds one fails here until someone decides what it means), and the
adapter acts on it: a broken read is retried, a refused key goes to no other model, a
defect (an exception no endpoint can cause) is raised unchanged after one attempt."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx2
import pytest

from squidd.errors import LLMCredentialsError, LLMUnavailableError
from squidd.llm.errors import TABLE, translate
from squidd.llm.status import ErrorAnswer, error_of
from tests.llm.test_openai import HELLO, _sse, collect, llm_over, text_of
from tests.support.libraries import exception_classes

pytestmark = pytest.mark.anyio


def test_every_exception_the_library_defines_is_in_the_table() -> None:
    missing = {cls.__qualname__ for cls in exception_classes(httpx2) if cls not in TABLE}
    assert missing == set()


def test_an_exception_outside_the_libraries_is_no_endpoint_trouble() -> None:
    assert translate(KeyError("bug")) is None
    assert translate(httpx2.StreamConsumed()) is None


class _BreaksAfter(httpx2.AsyncByteStream):
    def __init__(self, first: bytes, error: Exception) -> None:
        self._first = first
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._first
        raise self._error


def _handler_breaking_with(
    error: Exception, attempts: list[int]
) -> Callable[[httpx2.Request], httpx2.Response]:
    partial = _sse({"content": "Half an ans"}, finish="stop").split(b"data: [DONE]")[0]

    def handler(request: httpx2.Request) -> httpx2.Response:
        attempts.append(1)
        if len(attempts) == 1:
            return httpx2.Response(
                200,
                headers={"content-type": "text/event-stream"},
                stream=_BreaksAfter(partial, error),
            )
        return httpx2.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=_sse({"content": "A whole answer."}, finish="stop"),
        )

    return handler


async def test_a_read_error_in_the_stream_is_retried() -> None:
    attempts: list[int] = []
    llm = llm_over(_handler_breaking_with(httpx2.ReadError("reset"), attempts), max_retries=1)
    assert text_of(await collect(llm.chat(HELLO, []))) == "A whole answer."
    assert len(attempts) == 2


async def test_a_defect_in_the_stream_is_raised_unchanged_and_not_retried() -> None:
    attempts: list[int] = []
    llm = llm_over(
        _handler_breaking_with(httpx2.StreamConsumed(), attempts),
        max_retries=3,
        fallback_models=["other-model"],
    )
    with pytest.raises(httpx2.StreamConsumed):
        await collect(llm.chat(HELLO, []))
    assert len(attempts) == 1


async def test_a_refused_key_tries_no_other_model() -> None:
    asked: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        asked.append(request.url.path)
        return httpx2.Response(401, json={"error": {"message": "bad key"}})

    llm = llm_over(handler, max_retries=3, fallback_models=["other-model"])
    with pytest.raises(LLMCredentialsError):
        await collect(llm.chat(HELLO, []))
    assert len(asked) == 1


def test_retry_after_travels_with_the_error() -> None:
    answer = ErrorAnswer.parse(429, httpx2.Headers({"retry-after": "7"}), "")
    error = error_of(answer, "m")
    assert isinstance(error, LLMUnavailableError) and error.retry_after_s == 7.0
