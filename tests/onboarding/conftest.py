"""Onboarding (`squidd init --interactive`, `squidd doctor`) meets every server at once: the
real Synapse and the real Dovecot + Postfix of the channel tests, started once for this
package and stopped by PID when its tests are done."""

from __future__ import annotations

from tests.support.mail import mail_server
from tests.support.matrix import make_human, make_user, squidds, synapse, uid

__all__ = ["mail_server", "make_human", "make_user", "squidds", "synapse", "uid"]
