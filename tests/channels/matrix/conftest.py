"""Fixtures of the Matrix tests: people and a bot on the suite's real Synapse
(tests/support/servers.py), the `squidd run` children a test started and a daemon set up
for a person (all from tests/support/matrix.py and matrix_daemon.py). The helpers are in
tests/support (matrix.py, matrix_channel.py, matrix_daemon.py)."""

from __future__ import annotations

from tests.support.daemon import data_dir as data_dir
from tests.support.matrix import bot as bot
from tests.support.matrix import make_element as make_element
from tests.support.matrix import make_human as make_human
from tests.support.matrix import make_user as make_user
from tests.support.matrix import squidds as squidds
from tests.support.matrix import uid as uid
from tests.support.matrix_channel import alice_allowed as alice_allowed
from tests.support.matrix_daemon import matrix_squidd as matrix_squidd
from tests.support.matrix_daemon import scene as scene
