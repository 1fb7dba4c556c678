"""The adapter's usage event and its context-overflow error, over a mocked transport."""

from __future__ import annotations

import pytest

from squidd.core.models import Message, TextDelta, Usage
from squidd.errors import LLMContextOverflowError
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm

pytestmark = pytest.mark.anyio


async def test_usage_arrives_last_and_is_asked_for() -> None:
    llm, mock = scripted_llm(Reply(content="hi", usage=(120, 7, 100)))
    events = [e async for e in llm.chat([Message(role="user", content="hello")], [])]
    assert events[-1] == Usage("main-model", 120, 7, 100, provider="default")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hi"
    assert mock.requests[0]["stream_options"] == {"include_usage": True}


async def test_context_overflow_is_its_own_error_and_tries_no_fallback() -> None:
    llm, mock = scripted_llm(
        Reply(status=400, error_code="context_length_exceeded"),
        "from the fallback",
        fallback_models=["small-model"],
    )
    with pytest.raises(LLMContextOverflowError):
        async for _ in llm.chat([Message(role="user", content="x")], []):
            pass
    assert len(mock.requests) == 1
