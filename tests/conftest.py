"""Shared fixtures: the anyio backend, the scripted LLM server, and the storage ports; and
the hooks that print the lines tests noted for the end of the run (tests/support/summary.py,
here because the root conftest is the only one a pytest-xdist controller loads), and the
one that keeps a test's report sendable from a worker (tests/support/reports.py).

Each storage-port fixture is parametrised over the file implementation (`[file]`) and the
in-memory double of `tests/support/doubles.py` (`[double]`): the contract suites in
`tests/contracts/` hold both to one behaviour, and unit tests that take a fixture (memory,
agent, scheduler) run on both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from squidd.core.ports import HandledLog, JobStore, MemoryStore
from squidd.store.cron_jobs import JobsFile
from squidd.store.handled import HandledFile
from squidd.store.jsonl import JsonlStore
from squidd.store.outbox import OutboxDir
from tests.support.daemon import kill_leftovers, running
from tests.support.doubles import InMemoryStore, MemoryHandledLog, MemoryJobStore, MemoryOutbox
from tests.support.fake_llm import FakeLLM
from tests.support.reports import (
    pytest_runtest_makereport as pytest_runtest_makereport,
)
from tests.support.servers import mail_server as mail_server
from tests.support.servers import synapse as synapse
from tests.support.summary import (
    pytest_sessionfinish as pytest_sessionfinish,
)
from tests.support.summary import (
    pytest_terminal_summary as pytest_terminal_summary,
)
from tests.support.summary import (
    pytest_testnodedown as pytest_testnodedown,
)

# Property tests are the same on every run (CI must never fail by chance: a failing example
# is found by any run, not by a lucky one), keep no example database in the work tree, and
# have no per-example deadline nor a health check on how fast examples are made (the machine
# may be busy; no timed assertions).
settings.register_profile(
    "squidd",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("squidd")


@pytest.fixture(autouse=True)
def _no_daemon_outlives_its_test() -> Iterator[None]:
    """A `squidd run` child a failing test left running is killed when the test ends, not
    left to hold its ports, its data dir and a core of a shared machine. One a wider fixture
    started before the test belongs to that fixture."""
    before = running()
    yield
    kill_leftovers(keep=before)


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


@pytest.fixture(params=["file", "double"])
def handled_log(request: pytest.FixtureRequest, tmp_path: Path) -> HandledLog:
    return HandledFile(tmp_path) if request.param == "file" else MemoryHandledLog()


@pytest.fixture(params=["file", "double"])
def outbox(request: pytest.FixtureRequest, tmp_path: Path) -> OutboxDir | MemoryOutbox:
    return OutboxDir(tmp_path) if request.param == "file" else MemoryOutbox()


@pytest.fixture(params=["file", "double"])
def job_store(request: pytest.FixtureRequest, tmp_path: Path) -> JobStore:
    return JobsFile(tmp_path) if request.param == "file" else MemoryJobStore()
