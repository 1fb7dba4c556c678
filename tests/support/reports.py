"""Test reports that can leave an xdist worker: text without lone surrogates.

A pytest-xdist worker sends each test's report to the controller through execnet, which
sends only text that encodes as UTF-8. Some tests feed squidd hostile text on purpose
(`"\\ud800"` in a room id); a library's log record keeps it raw, pytest captures the record
into the report, and the worker that cannot send the report dies, taking the run with it.
Such characters are written escaped (`\\ud800`) in the report's captured output and failure
text; what the test checked is unchanged. A run without workers is not affected.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest


def _sendable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_sendable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport() -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    report.sections = [(title, _sendable(text)) for title, text in report.sections]
    if report.longrepr is not None and not _is_sendable(str(report.longrepr)):
        report.longrepr = _sendable(str(report.longrepr))
