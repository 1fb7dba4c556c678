"""Lines for the end of the run's output: the fault suite's counts, how long each real
server was up. Tests and fixtures `note` them; the root conftest imports the hooks below, so
the process that prints the summary prints them.

Under pytest-xdist (`scripts/test` runs the suite on several workers) the tests run in worker
processes, and only the controller prints a summary: a worker hands its lines over in
`workeroutput` when its session ends, and the controller gathers them as each worker goes
down. A plain `pytest` run has no workers and prints its own lines. Only the root conftest
can carry these hooks: the controller collects nothing, so it loads no package's conftest.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

_KEY = "squidd_summary"
_lines: list[tuple[str, str]] = []  # (section, line), in the order noted; this process's


def note(section: str, line: str) -> None:
    """Print `line` under the heading `section` at the end of the run."""
    _lines.append((section, line))


def worker_id() -> str:
    """`gw0`, `gw1`... in a pytest-xdist worker; `main` in a run without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_KEY] = [list(entry) for entry in _lines]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    for section, line in getattr(node, "workeroutput", {}).get(_KEY, []):
        _lines.append((section, line))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return  # a worker's summary is not shown; its lines went to the controller
    sections: dict[str, list[str]] = {}
    for section, line in _lines:
        sections.setdefault(section, []).append(line)
    for section, lines in sections.items():
        terminalreporter.section(section)
        for line in lines:
            terminalreporter.write_line(line)
