"""The fault suite: every test here is marked `faults`, and the counts each scenario
printed are repeated at the end of the run, where CI output shows them (harness.py notes
them for tests/support/summary.py, which also carries them out of xdist workers). The real mail
servers and Synapse are the suite's (tests/conftest.py), each started once per worker."""

from __future__ import annotations

import pytest

from tests.support.daemon import daemons as daemons
from tests.support.matrix import bot as bot
from tests.support.matrix import make_human as make_human
from tests.support.matrix import make_user as make_user
from tests.support.matrix import squidds as squidds
from tests.support.matrix import uid as uid
from tests.support.matrix_daemon import matrix_squidd as matrix_squidd
from tests.support.matrix_daemon import scene as scene


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/faults/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.faults)
