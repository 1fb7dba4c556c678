"""Fixtures of the daemon's tests (their helpers are in tests/support/gateway.py and, for
`squidd run` with the spool channel, tests/support/spool_daemon.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog

from tests.support.spool_daemon import daemons as daemons


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Tests that call `squidd.cli.main` configure logging onto pytest's capture streams,
    which are closed after the test; put the defaults back so later tests do not log there."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
