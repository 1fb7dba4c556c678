"""The handled-log contract (`core.ports.HandledLog`): the file and the double agree."""

from __future__ import annotations

import pytest

from squidd.core.ports import HandledLog

pytestmark = pytest.mark.anyio

ODD_IDS = ["", "$ev:example.org", "../../x", "a\nb", "Ev", "ev", "<id@host>", "ü" * 300]


async def test_nothing_is_handled_at_first(handled_log: HandledLog) -> None:
    assert not await handled_log.contains("matrix", "$ev")


async def test_an_added_pair_is_contained_and_adding_again_is_harmless(
    handled_log: HandledLog,
) -> None:
    await handled_log.add("matrix", "$ev")
    await handled_log.add("matrix", "$ev")
    assert await handled_log.contains("matrix", "$ev")


async def test_the_channel_is_part_of_the_key(handled_log: HandledLog) -> None:
    await handled_log.add("matrix", "1")
    assert not await handled_log.contains("email", "1")
    assert not await handled_log.contains("matrix", "2")


async def test_odd_ids_are_kept_apart(handled_log: HandledLog) -> None:
    for source_id in ODD_IDS[::2]:
        await handled_log.add("c", source_id)
    assert [await handled_log.contains("c", s) for s in ODD_IDS] == [True, False] * 4


async def test_a_failed_pair_is_handled_and_remembered_as_failed(handled_log: HandledLog) -> None:
    await handled_log.add("email", "<a@x>", failed=True)
    await handled_log.add("email", "<b@x>")
    assert await handled_log.contains("email", "<a@x>")
    assert await handled_log.failed("email", "<a@x>")
    assert not await handled_log.failed("email", "<b@x>")
    assert not await handled_log.failed("matrix", "<a@x>")
