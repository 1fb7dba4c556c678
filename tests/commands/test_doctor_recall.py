"""`squidd doctor`'s recall line: the `[memory.recall]` embeddings model is asked to embed
one text (the scripted `/v1/embeddings` server on loopback); a refusal is a ✗ with the fix,
`--no-llm-call` skips it, no embeddings model means no line."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.config import Settings
from squidd.ops.doctor import Outcome
from squidd.ops.doctor.recall import recall_checks
from tests.support.fake_embeddings import EmbeddingsServer

pytestmark = pytest.mark.anyio


def settings(tmp_path: Path, base_url: str, model: str) -> Settings:
    return Settings.model_validate(
        {
            "storage": {"data_dir": str(tmp_path)},
            "llm": {
                "providers": [
                    {"name": "chat", "base_url": "http://127.0.0.1:9/v1"},
                    {"name": "emb", "base_url": base_url},
                ],
                "chain": ["chat/m"],
            },
            "memory": {"recall": {"embeddings": f"emb/{model}"}},
        }
    )


async def test_the_embeddings_model_answers_or_is_a_fail(tmp_path: Path) -> None:
    with EmbeddingsServer() as emb:
        good = settings(tmp_path, emb.base_url, emb.model)
        [line] = await recall_checks(good, call=True)
        assert line.outcome is Outcome.OK and f"{emb.dim} dimensions" in line.detail
        assert emb.inputs == ["squidd doctor"]

        emb.fail_next = [404]
        [line] = await recall_checks(good, call=True)
        assert line.outcome is Outcome.FAIL and "404" in line.detail, line.detail
        assert "memory.recall.embeddings" in line.fix

        [line] = await recall_checks(good, call=False)
        assert line.outcome is Outcome.SKIP
        assert emb.requests == 2  # the skipped check asked nothing

    none = Settings.model_validate({"storage": {"data_dir": str(tmp_path)}})
    assert await recall_checks(none, call=True) == []
