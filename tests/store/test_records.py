"""Every record written to disk comes back whole: each is built by the strategies in
tests/support/records.py with arbitrary valid values, written through the real store into
a fresh folder, read back, and compared as a whole object (never chosen fields). Files as
the version before the codecs wrote them still load."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from hypothesis import given

from squidd.core.models import (
    Attachment,
    ChannelName,
    Destination,
    Inbound,
    InboundKind,
    PendingReply,
    SessionId,
    SourceId,
)
from squidd.core.poison import Parked, ParkState
from squidd.core.reply_files import FileRef
from squidd.errors import StorageError
from squidd.store.backup import Manifest
from squidd.store.outbox import OutboxDir
from squidd.store.parked import ParkedDir
from tests.support.records import EXAMPLES, folder, manifests, parked_items, pending_replies, texts


@EXAMPLES
@given(item=parked_items)
def test_a_parked_item_comes_back_whole(item: Parked) -> None:
    with folder() as data:
        ParkedDir(data).park_sync(item)
        assert ParkedDir(data).get_sync(item.id) == item


@EXAMPLES
@given(reply=pending_replies, channel=texts, source_id=texts)
def test_an_outbox_entry_comes_back_whole(
    reply: PendingReply, channel: str, source_id: str
) -> None:
    async def main(data: Path) -> PendingReply | None:
        await OutboxDir(data).put(channel, source_id, reply)
        return await OutboxDir(data).get(channel, source_id)

    with folder() as data:
        assert anyio.run(main, data) == reply


async def _hook() -> None:
    return None


async def _refused(reason: str) -> None:
    return None


def test_a_parked_message_is_kept_without_its_hooks_and_record_id(tmp_path: Path) -> None:
    """The hooks are the source's (a retry gives its own); the record id is one run's."""
    message = Inbound(
        ChannelName("email"),
        SourceId("<m1@x>"),
        SessionId("alice@x"),
        "alice@x",
        "hello",
        ack=_hook,
        on_undeliverable=_refused,
        record_id="parked:0123456789ab:1",
        command="/new",
    )
    item = Parked("0123456789ab", "message", "email", "<m1@x>", "alice@x", "r", "E", 3)
    ParkedDir(tmp_path).park_sync(dataclasses.replace(item, inbound=message))
    kept = ParkedDir(tmp_path).get_sync(item.id).inbound
    bare = Inbound(
        ChannelName("email"),
        SourceId("<m1@x>"),
        SessionId("alice@x"),
        "alice@x",
        "hello",
        received_at=message.received_at,
        command="/new",
    )
    assert kept == bare


# A parked item as the version before the codecs wrote it (its message without `command`).
OLD_PARKED = {
    "id": "0123456789ab",
    "loop": "message",
    "channel": "email",
    "source_id": "<m1@x>",
    "session_id": "alice@x",
    "reason": "ValueError: bad",
    "error": "ValueError",
    "attempts": 3,
    "parked_at": "2026-03-02T12:00:00.123456+00:00",
    "inbound": {
        "channel": "email",
        "source_id": "<m1@x>",
        "session_id": "alice@x",
        "sender": "alice@x",
        "text": "hello",
        "reply_to": "email:alice@x",
        "quiet_reply": None,
        "thread_root": None,
        "subject": "Re: hi",
        "meta": {"message_id": "<m1@x>", "references": ["<r1@x>"]},
        "attachments": [{"kind": "file", "name": "a.txt", "mime": "text/plain", "size": 3}],
        "kind": "message",
        "conversation_channel": "",
        "received_at": "2026-03-02T11:59:00+01:00",
    },
    "reply": {
        "channel": "email",
        "target": "alice@x",
        "text": "the answer",
        "session_id": "alice@x",
        "subject": "Re: hi",
        "files": [
            {
                "path": "/w/a.png",
                "kind": "image",
                "mime": "image/png",
                "size": 3,
                "sha256": "00",
                "name": "a.png",
            }
        ],
    },
    "state": "retry",
    "retries": 1,
}


def test_a_parked_item_written_before_the_codecs_loads(tmp_path: Path) -> None:
    (tmp_path / "parked").mkdir()
    (tmp_path / "parked" / "0123456789ab.json").write_text(json.dumps(OLD_PARKED, indent=1))
    item = ParkedDir(tmp_path).get_sync("0123456789ab")
    assert item == Parked(
        id="0123456789ab",
        loop="message",
        channel="email",
        source_id="<m1@x>",
        session_id="alice@x",
        reason="ValueError: bad",
        error="ValueError",
        attempts=3,
        parked_at=datetime(2026, 3, 2, 12, 0, 0, 123456, tzinfo=UTC),
        inbound=Inbound(
            ChannelName("email"),
            SourceId("<m1@x>"),
            SessionId("alice@x"),
            "alice@x",
            "hello",
            reply_to=Destination(ChannelName("email"), "alice@x"),
            subject="Re: hi",
            meta={"message_id": "<m1@x>", "references": ["<r1@x>"]},
            attachments=(Attachment("file", "a.txt", "text/plain", 3),),
            kind=InboundKind.MESSAGE,
            received_at=datetime(2026, 3, 2, 10, 59, tzinfo=UTC),
        ),
        reply=PendingReply(
            ChannelName("email"),
            "alice@x",
            "the answer",
            SessionId("alice@x"),
            "Re: hi",
            (FileRef("/w/a.png", "image", "image/png", 3, "00", "a.png"),),
        ),
        state=ParkState.RETRY,
        retries=1,
    )


@pytest.mark.anyio
async def test_an_outbox_entry_from_before_files_and_subjects_loads(tmp_path: Path) -> None:
    outbox = OutboxDir(tmp_path)
    path = tmp_path / "gateway" / "outbox"
    path.mkdir(parents=True)
    old = {"channel": "email", "target": "a@x.org", "text": "t", "session_id": "s"}
    (path / outbox._name("email", "<1@x>")).write_text(json.dumps(old))
    assert await outbox.get("email", "<1@x>") == PendingReply(
        ChannelName("email"), "a@x.org", "t", SessionId("s")
    )


@pytest.mark.anyio
async def test_an_outbox_entry_with_an_unknown_file_kind_is_not_a_reply(tmp_path: Path) -> None:
    outbox = OutboxDir(tmp_path)
    reply = PendingReply(
        ChannelName("matrix"),
        "!r:x",
        "t",
        SessionId("s"),
        files=(FileRef("/w/a.png", "image", "image/png", 3, "00" * 32, "a.png"),),
    )
    await outbox.put("matrix", "$1", reply)
    path = tmp_path / "gateway" / "outbox" / outbox._name("matrix", "$1")
    data = json.loads(path.read_text())
    data["files"][0]["kind"] = "blob"
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match="not a pending reply"):
        await OutboxDir(tmp_path).get("matrix", "$1")


@EXAMPLES
@given(manifest=manifests)
def test_a_backup_manifest_comes_back_whole(manifest: Manifest) -> None:
    assert Manifest.from_json(manifest.to_json().encode()) == manifest


class Opaque:
    def __str__(self) -> str:
        return "opaque value"


def test_a_meta_value_json_cannot_hold_is_kept_as_its_text(tmp_path: Path) -> None:
    """`meta` is the channel's own and typed Any: parking never fails on it."""
    message = Inbound(
        ChannelName("x"), SourceId("s"), SessionId("s"), "a", "t", meta={"o": Opaque()}
    )
    item = Parked("0123456789ab", "message", "x", "s", "s", "r", "E", 3, inbound=message)
    ParkedDir(tmp_path).park_sync(item)
    kept = ParkedDir(tmp_path).get_sync(item.id).inbound
    assert kept is not None and kept.meta == {"o": "opaque value"}
