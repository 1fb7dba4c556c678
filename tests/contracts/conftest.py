"""Each port's file implementation and its in-memory double, as one parametrised fixture:
every contract test runs against both (`-k file` or `-k double` picks one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.core.ports import HandledLog
from squidd.core.scheduling import JobStore
from squidd.store.cron_jobs import JobsFile
from squidd.store.handled import HandledFile
from squidd.store.outbox import OutboxDir
from tests.support.doubles import MemoryHandledLog, MemoryJobStore, MemoryOutbox


@pytest.fixture(params=["file", "double"])
def handled_log(request: pytest.FixtureRequest, tmp_path: Path) -> HandledLog:
    return HandledFile(tmp_path) if request.param == "file" else MemoryHandledLog()


@pytest.fixture(params=["file", "double"])
def outbox(request: pytest.FixtureRequest, tmp_path: Path) -> OutboxDir | MemoryOutbox:
    return OutboxDir(tmp_path) if request.param == "file" else MemoryOutbox()


@pytest.fixture(params=["file", "double"])
def job_store(request: pytest.FixtureRequest, tmp_path: Path) -> JobStore:
    return JobsFile(tmp_path) if request.param == "file" else MemoryJobStore()
