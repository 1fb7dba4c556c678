"""For tests that call the command line: in this process (`squidd.cli.main`, whose logging
setup must be undone after the test) or as a child (`squidd config check`)."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog


@pytest.fixture(autouse=True)
def logging_back_to_defaults() -> Iterator[None]:
    """`main` points the logs at the captured stdout, which closes after the test: its
    handlers go and structlog's defaults come back. Autouse in each module that imports it."""
    yield
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "squidd_handler", False)]:
        root.removeHandler(handler)


def config_check(config: Path) -> subprocess.CompletedProcess[str]:
    """`squidd config check --config <config>` as a child, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "squidd", "config", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
