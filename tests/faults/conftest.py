"""The fault suite: every test here is marked `faults`, and the counts each scenario
printed are repeated at the end of the run, where CI output shows them. The real mail
servers are the email tests' fixture and Synapse the Matrix tests', each started once for
this package."""

from __future__ import annotations

import pytest

from tests.channels.email.conftest import mail_server as mail_server
from tests.channels.matrix.conftest import bot as bot
from tests.channels.matrix.conftest import make_human as make_human
from tests.channels.matrix.conftest import make_user as make_user
from tests.channels.matrix.conftest import squidds as squidds
from tests.channels.matrix.conftest import synapse as synapse
from tests.channels.matrix.conftest import uid as uid
from tests.faults.harness import REPORTED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/faults/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.faults)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORTED:
        terminalreporter.section("fault suite counts")
        for line in REPORTED:
            terminalreporter.write_line(line)
