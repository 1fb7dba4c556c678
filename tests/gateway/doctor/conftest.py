"""The doctor checks every server at once: the real Synapse and the real Dovecot + Postfix of
the channel tests (package scope here too, stopped by PID when these tests are done)."""

from __future__ import annotations

from tests.channels.email.conftest import mail_server
from tests.channels.matrix.conftest import synapse

__all__ = ["mail_server", "synapse"]
