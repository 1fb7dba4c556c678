"""The outbox contract (`core.ports.Outbox`, plus the count `squidd status` shows): the
directory of files and the double agree."""

from __future__ import annotations

import pytest

from squidd.core.models import PendingReply, SessionId
from squidd.core.reply_files import FileRef
from squidd.store.outbox import OutboxDir
from tests.support.doubles import MemoryOutbox

pytestmark = pytest.mark.anyio

Outbox = OutboxDir | MemoryOutbox

REPLY = PendingReply("email", "alice@example.org", "Grüße\nline two", SessionId("e:a"), "Re: hi")
OTHER = PendingReply("matrix", "!r:x", "other", SessionId("m:r"))
WITH_FILES = PendingReply(
    "matrix",
    "!r:x",
    "here it is",
    SessionId("m:r"),
    files=(
        FileRef("/w/report.pdf", "file", "application/pdf", 1234, "ab" * 32, "report.pdf"),
        FileRef("/m/s/cd.png", "image", "image/png", 99, "cd" * 32, "chart.png"),
    ),
)


async def test_empty(outbox: Outbox) -> None:
    assert await outbox.get("email", "<1@x>") is None
    assert await outbox.count() == 0


async def test_put_then_get_gives_the_same_reply(outbox: Outbox) -> None:
    await outbox.put("email", "<1@x>", REPLY)
    assert await outbox.get("email", "<1@x>") == REPLY
    assert await outbox.count() == 1


async def test_a_reply_keeps_its_file_references(outbox: Outbox) -> None:
    await outbox.put("matrix", "$e", WITH_FILES)
    assert await outbox.get("matrix", "$e") == WITH_FILES


async def test_put_again_replaces(outbox: Outbox) -> None:
    await outbox.put("email", "<1@x>", REPLY)
    await outbox.put("email", "<1@x>", OTHER)
    assert await outbox.get("email", "<1@x>") == OTHER
    assert await outbox.count() == 1


async def test_remove_drops_one_entry_and_a_missing_one_is_no_error(outbox: Outbox) -> None:
    await outbox.put("email", "<1@x>", REPLY)
    await outbox.put("email", "<2@x>", OTHER)
    await outbox.remove("email", "<1@x>")
    await outbox.remove("email", "<1@x>")
    await outbox.remove("matrix", "never")
    assert await outbox.get("email", "<1@x>") is None
    assert await outbox.get("email", "<2@x>") == OTHER
    assert await outbox.count() == 1


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("matrix", "1"), ("email", "1")),
        (("c", "Ev"), ("c", "ev")),
        (("c", "a:b"), ("c", "a_b")),
        (("c", "../x"), ("c", "x")),
    ],
)
async def test_keys_are_kept_apart(
    outbox: Outbox, first: tuple[str, str], second: tuple[str, str]
) -> None:
    await outbox.put(*first, REPLY)
    assert await outbox.get(*second) is None
    await outbox.put(*second, OTHER)
    assert await outbox.get(*first) == REPLY
    assert await outbox.count() == 2
