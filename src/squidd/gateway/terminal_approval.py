"""The terminal's way to ask for an approval (`squidd chat`): `Run shell: <command>? [y/N]`.

With a person at a terminal (stdin is a TTY) the question is asked on it and the answer read
at once: `y`/`yes` runs the call once, `a`/`always` runs it and grants an `always` rule for
the session, anything else (Enter, Ctrl-D) is no. Without one (`squidd chat -m` in a script)
nobody can say yes: the call is denied and the refusal kept in `refused`, for the command to
say beside the reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

import anyio.to_thread

from squidd.core.approvals import Answer, Choice, Question
from squidd.core.models import Inbound
from squidd.log import escape_unprintable

__all__ = ["TerminalAsker"]

_YES = frozenset({"y", "yes"})
_ALWAYS = frozenset({"a", "always"})
NO_TERMINAL = "no terminal"


class TerminalAsker:
    def __init__(
        self, *, is_tty: bool, read: Callable[[str], str] = input, out: TextIO | None = None
    ) -> None:
        self._is_tty = is_tty
        self._read = read
        self._out = out
        self.refused: list[str] = []

    async def ask(self, question: Question, asked_from: Inbound | None = None) -> Answer:
        if not self._is_tty:
            self.refused.append(
                f"{question.tool} was not run: it needs approval and there is no terminal "
                "to ask (run `squidd chat` in a terminal to approve it)"
            )
            return Answer(Choice.NO, NO_TERMINAL)
        prompt = f"\n{escape_unprintable(question.prompt())} [y/N] "
        if self._out is not None:
            self._out.write(prompt)
            self._out.flush()
            prompt = ""
        try:
            line = await anyio.to_thread.run_sync(self._read, prompt)
        except EOFError:
            line = ""
        word = line.strip().lower()
        if word in _YES:
            return Answer(Choice.ONCE, "terminal")
        if word in _ALWAYS:
            return Answer(Choice.ALWAYS, "terminal")
        return Answer(Choice.NO, "terminal")
