"""Onboarding (`squidd init --interactive`, `squidd doctor`) meets every server at once: the
suite's real Synapse and Dovecot + Postfix (tests/conftest.py)."""

from __future__ import annotations

from tests.support.matrix import make_human, make_user, squidds, uid

__all__ = ["make_human", "make_user", "squidds", "uid"]
