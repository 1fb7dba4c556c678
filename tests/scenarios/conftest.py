"""Fixtures of the scenarios: the real servers (one Synapse, one Dovecot + Postfix, each
started once for this package and only when a scenario needs it), people on them, and the
`squidd run` children a scenario started, killed at its end if still running."""

from __future__ import annotations

import pytest

from tests.channels.email.mailbox import MailServer
from tests.support.mail import mail_server
from tests.support.matrix import (
    bot,
    make_element,
    make_human,
    make_user,
    squidds,
    synapse,
    uid,
)
from tests.support.matrix_daemon import matrix_squidd, scene

__all__ = ["bot", "mail_server", "make_element", "make_human", "make_user", "squidds", "synapse"]
__all__ += ["matrix_squidd", "scene", "uid"]


@pytest.fixture
def mail_bot(mail_server: MailServer) -> str:
    """A fresh bot mailbox (an empty INBOX) for one scenario."""
    return mail_server.take_bot()
