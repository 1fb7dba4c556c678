"""`squidd memory reindex` with no daemon running: the recall index rebuilt from the
histories by the command itself, against a scripted embeddings server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from squidd.cli import main
from squidd.core.models import Message, SessionId
from squidd.store.jsonl import JsonlStore
from squidd.store.recall_index import RecallIndex
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config
from tests.support.fake_embeddings import EmbeddingsServer


@pytest.fixture
def embeddings() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer() as server:
        yield server


def test_reindex_rebuilds_the_vectors_from_the_histories(
    tmp_path: Path, embeddings: EmbeddingsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    config = data_dir_config(
        tmp_path,
        llm={"base_url": embeddings.base_url},
        **{"memory.recall": {"embeddings": f"default/{embeddings.model}"}},
    )
    store = JsonlStore(tmp_path / "data")
    said = [Message(role="user", content=f"fact number {i}", by="ann") for i in range(3)]
    anyio.run(store.append_messages, SessionId("mail:ann"), said)
    for _ in range(2):  # twice: a rebuild, not an append
        assert main(["--config", str(config), "memory", "reindex"]) == 0
        assert "3 messages" in capsys.readouterr().out
    index = RecallIndex(store)
    assert index.open(embeddings.model)  # the command let go of it
    assert index.rows == 3
    assert oct(index.root.stat().st_mode & 0o777) == "0o700"
    assert {oct(p.stat().st_mode & 0o777) for p in index.root.iterdir()} == {"0o600"}
    index.close()


def test_reindex_without_an_embeddings_model_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = data_dir_config(tmp_path)
    assert main(["--config", str(config), "memory", "reindex"]) == 1
    assert "no embeddings model" in capsys.readouterr().out
