"""Every record written to disk comes back whole: each is built by the strategies in
tests/support/records.py with arbitrary valid values, written through the real store into
a fresh folder, read back, and compared as a whole object (never chosen fields)."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given, settings

from squidd.core.models import Inbound
from squidd.core.poison import Parked, inbound_from_record, inbound_record
from squidd.store.parked import ParkedDir
from tests.support.records import inbounds, texts

EXAMPLES = settings(max_examples=60, deadline=None)


@contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


async def _ack() -> None:
    return None


async def _undeliverable(reason: str) -> None:
    return None


@EXAMPLES
@given(inbound=inbounds, record=texts.filter(bool))
def test_a_parked_inbound_comes_back_whole(inbound: Inbound, record: str) -> None:
    with folder() as data:
        store = ParkedDir(data)
        store.park_sync(
            Parked(
                "0123456789ab",
                "message",
                "c",
                "s",
                "x",
                "r",
                "E",
                3,
                inbound=inbound_record(inbound),
            )
        )
        kept = store.get_sync("0123456789ab").inbound
        assert kept is not None
        back = inbound_from_record(
            kept, record_id=record, ack=_ack, on_undeliverable=_undeliverable
        )
    assert back == dataclasses.replace(
        inbound, record_id=record, ack=_ack, on_undeliverable=_undeliverable
    )
