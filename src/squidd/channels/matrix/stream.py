"""Streaming by edits: an answer shown as it is written, within the homeserver's limits.

The first chunk of the answer goes out as the reply; later text replaces it through
`m.replace` edits (`m.new_content` plus the `* ` fallback body); an answer shorter than
`stream_first_chars` is not streamed at all. `Pacer` keeps the edits
under stock Synapse's `rc_message` (0.2 events/s after a burst of 10): a few quick edits at
the start, then at most one every `stream_interval_s`, at most `stream_max_edits` per answer,
and none once the partial text is over `stream_max_chars` (the rest waits for the final
edit). The final edit is not sent here: the router delivers the reply through the outbox as
always, and `MatrixChannel.send` turns it into the final edit of the streamed message
(`final_edit`), carrying the full formatted body; when that edit fails, the reply goes out as
a new message instead.

Every event has a transaction id derived from the turn key and the step (`first`, `edit-N`,
`final-N`), so a send retried after a timeout or a crash is deduplicated by the homeserver.
The first chunk and the edits are paid from the account's rate budget (`rate.py`) at the
lowest priority: one it cannot afford now is skipped (`Unaffordable`), and a later one, or
the final edit, carries its text; the pacer alone keeps a lone stream within the limit.
The streamed message's event id is kept on disk (`StreamRecords`, one small file per turn)
as soon as it is known: after a crash the resumed turn edits the same message, and the
reply delivered from the outbox becomes its final edit. A partial edit that fails stops the
streaming of that answer, never the turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.channels.matrix.rate import Unaffordable
from squidd.config.matrix import MatrixSettings
from squidd.fs import atomic_write_text, make_private_dir, read_text_or_empty, safe_name

log = structlog.get_logger()

SendEvent = Callable[[dict[str, Any], str], Awaitable[str]]
"""Send one room event (content, transaction id); its event id."""


def stream_transaction_id(key: str, step: str) -> str:
    """The transaction id of one step of a streamed answer (the same after a restart)."""
    digest = hashlib.sha256(f"stream\0{key}\0{step}".encode()).hexdigest()
    return f"squidd-{digest[:32]}"


def edit_content(new: dict[str, Any], event_id: str) -> dict[str, Any]:
    """An `m.replace` edit of `event_id` to `new` (a message content without relations)."""
    replacement = {k: v for k, v in new.items() if k != "m.relates_to"}
    content: dict[str, Any] = {
        "msgtype": new.get("msgtype", "m.text"),
        "body": f"* {new.get('body', '')}",
        "m.new_content": replacement,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        "m.mentions": {},
    }
    if "formatted_body" in new:
        content["format"] = new.get("format", "org.matrix.custom.html")
        content["formatted_body"] = f"* {new['formatted_body']}"
    return content


@dataclass(frozen=True)
class StreamRecord:
    """The streamed message of one turn: its room and event id."""

    room_id: str
    event_id: str


class StreamRecords:
    """`<data dir>/matrix/streams/<turn key>.json`: the event id of each streamed answer not
    yet finished, written atomically as soon as the first chunk was sent. The channel is
    its only writer, so after one listing it knows which records exist: the look-up every
    message and reply makes, which finds none, costs no file operation."""

    def __init__(self, root: Path) -> None:
        self._dir = root / "streams"
        self._present: set[str] | None = None  # file names, once listed

    def _path(self, key: str) -> Path:
        return self._dir / f"{safe_name(key)}.json"

    async def _names(self) -> set[str]:
        if self._present is None:

            def listing() -> set[str]:
                try:
                    return {p.name for p in self._dir.iterdir()}
                except FileNotFoundError:
                    return set()

            self._present = await anyio.to_thread.run_sync(listing)
        return self._present

    async def get(self, key: str) -> StreamRecord | None:
        if self._path(key).name not in await self._names():
            return None
        text = await anyio.to_thread.run_sync(read_text_or_empty, self._path(key))
        if not text:
            return None
        try:
            data = json.loads(text)
            return StreamRecord(str(data["room_id"]), str(data["event_id"]))
        except (ValueError, KeyError, TypeError):
            log.warning("matrix_stream_record_unreadable", key=key)
            return None

    async def put(self, key: str, record: StreamRecord) -> None:
        data = json.dumps({"room_id": record.room_id, "event_id": record.event_id})

        def write() -> None:
            make_private_dir(self._dir)
            atomic_write_text(self._path(key), data)

        await anyio.to_thread.run_sync(write)
        (await self._names()).add(self._path(key).name)

    async def remove(self, key: str) -> None:
        await anyio.Path(self._path(key)).unlink(missing_ok=True)
        (await self._names()).discard(self._path(key).name)


class Pacer:
    """When the next edit may go out (see the module docstring)."""

    def __init__(self, settings: MatrixSettings, monotonic: Callable[[], float]) -> None:
        self._settings = settings
        self._monotonic = monotonic
        self._last: float | None = None
        self.edits = 0

    def due(self, chars: int, *, first: bool) -> bool:
        s = self._settings
        if first:
            return chars >= s.stream_first_chars
        if self.edits >= s.stream_max_edits or chars > s.stream_max_chars:
            return False
        quick = self.edits < s.stream_quick_edits
        gap = s.stream_quick_interval_s if quick else s.stream_interval_s
        return self._last is None or self._monotonic() - self._last >= gap

    @property
    def limit(self) -> int:
        return self._settings.stream_max_chars

    def sent(self, *, first: bool) -> None:
        self._last = self._monotonic()
        if not first:
            self.edits += 1


class ReplyStream:
    """The `PartialReply` of one answer: sends the first chunk, then paced edits of it."""

    def __init__(
        self,
        *,
        key: str,
        room_id: str,
        records: StreamRecords,
        pacer: Pacer,
        render: Callable[[str], dict[str, Any]],
        send_first: SendEvent,
        send_edit: SendEvent,
    ) -> None:
        self._key = key
        self._room_id = room_id
        self._records = records
        self._pacer = pacer
        self._render = render
        self._send_first = send_first
        self._send_edit = send_edit
        self._event_id: str | None = None
        self._loaded = False
        self._stopped = False
        self._shown = ""
        self.skipped = 0

    async def text(self, so_far: str) -> None:
        if self._stopped or not so_far.strip() or so_far == self._shown:
            return
        try:
            if not self._loaded:
                self._loaded = True
                record = await self._records.get(self._key)  # a resumed turn: same message
                self._event_id = record.event_id if record is not None else None
            first = self._event_id is None
            if not self._pacer.due(len(so_far), first=first):
                return
            content = self._render(so_far[: self._pacer.limit])
            if self._event_id is None:
                tx_id = stream_transaction_id(self._key, "first")
                self._event_id = await self._send_first(content, tx_id)
                await self._records.put(self._key, StreamRecord(self._room_id, self._event_id))
            else:
                tx_id = stream_transaction_id(self._key, f"edit-{self._pacer.edits + 1}")
                await self._send_edit(edit_content(content, self._event_id), tx_id)
            self._pacer.sent(first=first)
            self._shown = so_far
        except Unaffordable:
            # The account's rate budget keeps its tokens for replies and reactions: this text
            # goes out with a later edit, or with the final one.
            self.skipped += 1
        except Exception as exc:  # noqa: BLE001 - never the turn's failure
            # The reply still goes out whole when the turn ends (`final_edit` or a message).
            self._stopped = True
            log.info("matrix_stream_stopped", reason=str(exc) or type(exc).__name__)

    @property
    def event_id(self) -> str | None:
        return self._event_id
