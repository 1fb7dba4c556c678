"""Where a Matrix message's chat command is read from: the text itself, or in a group room
the text after the bot's mention (`@bot /new`, `Squidd: /status`)."""

from __future__ import annotations

import pytest

from squidd.channels.matrix.policy import command_text

BOT = "@squidd:example.org"


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/new", "/new"),
        ("  /model big  ", "/model big"),
        ("@squidd:example.org /status", "/status"),
        ("Squidd: /stop", "/stop"),
        ("squidd, /help", "/help"),
        ("@Squidd /new", "/new"),
        ("Squidd what is /etc/hosts?", ""),
        ("hello Squidd /new", ""),
        ("Squiddy: /new", ""),
        ("", ""),
    ],
)
def test_command_after_the_mention(text: str, command: str) -> None:
    assert command_text(text, BOT, ["Squidd"]) == command
