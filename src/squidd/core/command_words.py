"""The chat command words: which first words of a message make it a command.

A message is a command when its text (or what the channel says the command is read from,
`Inbound.command`) is a slash and one of these words, then an optional argument. Any other
slash-shaped text (`/usr is full`, `/etc/hosts`) is an ordinary message for the model, and
bursts merge it like any other. The words the daemon answers in line (gateway/chat_commands/,
whose table is checked against `ANSWERED`) and the answers to an approval question
(gateway/approval_answers.py) are both here, so every stage of the pipeline, a channel's
too, asks this one module.
"""

from __future__ import annotations

import re
from collections.abc import Container

__all__ = ["ANSWERED", "APPROVAL", "KNOWN", "STOP", "parse"]

STOP = "stop"
ANSWERED = frozenset({"new", STOP, "status", "model", "usage", "approvals", "help"})
"""The commands of gateway/chat_commands/, answered in the conversation's line."""
APPROVAL = frozenset({"approve", "always", "deny"})
"""`/approve <id>`, `/always <id>`, `/deny <id>`: answers, taken before the line."""
KNOWN = ANSWERED | APPROVAL

_COMMAND = re.compile(r"/([A-Za-z][A-Za-z0-9_-]*)(?:\s+(.*))?", re.DOTALL)


def parse(text: str, known: Container[str] = KNOWN) -> tuple[str, str] | None:
    """`(name, argument)` of a text that is a command (its word in `known`); else None."""
    found = _COMMAND.fullmatch(text.strip())
    if found is None:
        return None
    name = found.group(1).lower()
    if name not in known:
        return None
    return name, (found.group(2) or "").strip()
