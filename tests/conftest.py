"""Shared fixtures: the anyio backend, the scripted LLM server, and the memory store (the
JSONL files and the in-memory double, so memory and agent tests run on both)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squidd.core.ports import MemoryStore
from squidd.store.jsonl import JsonlStore
from tests.support.doubles import InMemoryStore
from tests.support.fake_llm import FakeLLM


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(params=["file", "double"])
def memory_store(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryStore:
    return JsonlStore(tmp_path) if request.param == "file" else InMemoryStore()
