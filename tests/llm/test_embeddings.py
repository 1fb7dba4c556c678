"""The embeddings client against `/v1/embeddings` answers in OpenAI's documented shape (over
httpx2's MockTransport): vectors in input order, every malformed answer a clear error that
the indexer retries, a refusal a permanent one, and the key never in a message."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from squidd.errors import LLMCredentialsError, LLMRejectedError, LLMUnavailableError
from squidd.llm.embeddings import EmbeddingsClient

pytestmark = pytest.mark.anyio

KEY = "sk-embeddings-secret-1234"


def client_answering(status: int, body: Any, seen: list[httpx2.Request]) -> EmbeddingsClient:
    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        if isinstance(body, str):  # raw JSON text (numbers JSON cannot carry otherwise)
            return httpx2.Response(status, content=body.encode())
        return httpx2.Response(status, json=body)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return EmbeddingsClient("http://embed.test/v1", "m", KEY, timeout_s=5, http_client=http)


async def test_vectors_come_back_in_input_order() -> None:
    seen: list[httpx2.Request] = []
    body = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]},
        ],
        "model": "m",
    }
    client = client_answering(200, body, seen)
    assert await client.embed(["a", "b"]) == [[1.0, 0.0], [0.0, 1.0]]
    request = seen[0]
    assert str(request.url) == "http://embed.test/v1/embeddings"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert json.loads(request.content) == {"model": "m", "input": ["a", "b"]}
    await client.aclose()


@pytest.mark.parametrize(
    "body",
    [
        {"data": [{"index": 0, "embedding": [1.0]}]},  # one vector for two texts
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]},
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]},
        {"data": [{"index": 0, "embedding": ["x"]}, {"index": 1, "embedding": [2.0]}]},
        '{"data": [{"index": 0, "embedding": [1e400]}, {"index": 1, "embedding": [2.0]}]}',
        "not json",
        {"error": "nothing"},
        [1, 2],
    ],
)
async def test_a_malformed_answer_is_a_transient_error(body: Any) -> None:
    client = client_answering(200, body, [])
    with pytest.raises(LLMUnavailableError) as caught:
        await client.embed(["a", "b"])
    assert KEY not in str(caught.value)
    await client.aclose()


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (503, LLMUnavailableError),
        (429, LLMUnavailableError),
        (401, LLMCredentialsError),
        (400, LLMRejectedError),
    ],
)
async def test_statuses_map_to_transient_or_permanent(status: int, error: type[Exception]) -> None:
    client = client_answering(status, {"error": {"message": f"bad key {KEY}"}}, [])
    with pytest.raises(error) as caught:
        await client.embed(["a"])
    assert KEY not in str(caught.value)
    await client.aclose()
