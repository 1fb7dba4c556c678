"""Hypothesis strategies for every record squidd writes to disk and reads back.

Each strategy builds a whole record with arbitrary valid field values: text with odd
unicode (anything but lone surrogates and NUL, which every channel's inbox removes, see
`squidd.text.clean_text`), empty strings, None where a field is optional, tuples of files
and attachments, datetimes in arbitrary time zones. The round-trip tests
(tests/store/test_records.py) write them through the real stores and compare whole objects;
`EXAMPLES` is their shared hypothesis settings and `folder()` a fresh folder per example.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from squidd.core.approvals import AlwaysRule, Question, QuestionState
from squidd.core.audit import AuditEntry, Decision
from squidd.core.cron import CronJob
from squidd.core.models import (
    Attachment,
    ChannelName,
    Destination,
    Inbound,
    InboundKind,
    Message,
    PendingReply,
    SessionId,
    SourceId,
    ToolCall,
)
from squidd.core.poison import Parked, ParkState
from squidd.core.reply_files import FileRef
from squidd.core.runs import RUN_KINDS, PendingRun
from squidd.core.usage import Failover
from squidd.store.backup import Entry, Manifest

__all__ = [
    "EXAMPLES",
    "always_rules",
    "attachments",
    "audit_entries",
    "cron_jobs",
    "datetimes",
    "destinations",
    "failovers",
    "file_refs",
    "folder",
    "inbounds",
    "json_values",
    "manifests",
    "messages",
    "parked_items",
    "pending_replies",
    "pending_runs",
    "questions",
    "texts",
    "tool_calls",
    "usage_calls",
]

EXAMPLES = settings(max_examples=60, deadline=None)


@contextmanager
def folder() -> Iterator[Path]:
    """A fresh empty folder, removed afterwards: one per example (pytest's `tmp_path` is one
    per test, shared by all of hypothesis's examples)."""
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


_CHARS = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")

LINE_BREAKS = st.sampled_from(["\n", "\r", "\x85", "\u2028", "\u2029", "\x0b", "\x1c"])
"""What some readers take for the end of a line: a record must not be cut there."""

texts = st.lists(st.text(_CHARS, max_size=8) | LINE_BREAKS, max_size=6).map("".join)
"""Valid text, the empty string and line breaks of every kind included."""

names = st.from_regex(r"[a-z][a-z0-9_-]{0,11}", fullmatch=True)
"""A channel's name, as channels are named."""

ints = st.integers(min_value=0, max_value=2**53)

_OFFSETS = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)

datetimes = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31), timezones=_OFFSETS
)
"""Aware datetimes in arbitrary time zones (offsets in minutes, as ISO 8601 writes them)."""

utc_datetimes = datetimes.map(lambda moment: moment.astimezone(UTC))


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Anything JSON holds: objects, lists, text, numbers, booleans, null."""
    leaves = st.none() | st.booleans() | ints | st.floats(allow_nan=False) | texts
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
        max_leaves=max_leaves,
    )


destinations = st.builds(
    Destination,
    names.map(ChannelName),
    texts.filter(lambda t: t != "" and t.strip() == t),
)
"""Destinations as `Destination.parse` reads them (a channel name, an address)."""

attachments = st.builds(
    Attachment,
    kind=st.sampled_from(["image", "file", "audio", "video"]),
    name=texts,
    mime=texts,
    size=ints,
    sha256=texts,
    path=st.none() | texts,
    note=texts,
)

file_refs = st.builds(
    FileRef,
    path=texts,
    kind=st.sampled_from(["image", "file"]),
    mime=texts,
    size=ints,
    sha256=texts,
    name=texts,
)

pending_replies = st.builds(
    PendingReply,
    channel=names.map(ChannelName),
    target=texts,
    text=texts,
    session_id=texts.map(SessionId),
    subject=texts,
    files=st.lists(file_refs, max_size=3).map(tuple),
)

inbounds = st.builds(
    Inbound,
    channel=names.map(ChannelName),
    source_id=texts.map(SourceId),
    session_id=texts.map(SessionId),
    sender=texts,
    text=texts,
    reply_to=st.none() | destinations,
    quiet_reply=st.none() | texts,
    thread_root=st.none() | texts,
    subject=texts,
    meta=st.dictionaries(texts, json_values(), max_size=4),
    received_at=datetimes,
    attachments=st.lists(attachments, max_size=3).map(tuple),
    kind=st.sampled_from(list(InboundKind)),
    conversation_channel=texts,
    command=texts,
    group=st.booleans(),
    agent=texts,
    recipients=st.lists(texts, max_size=3).map(tuple),
)
"""Inbounds as a channel's inbox hands them on (default hooks, no record id)."""

parked_items = st.builds(
    Parked,
    id=st.from_regex(r"[0-9a-f]{12}", fullmatch=True),
    loop=texts,
    channel=texts,
    source_id=texts,
    session_id=texts,
    reason=texts,
    error=texts,
    attempts=ints,
    parked_at=datetimes,
    inbound=st.none() | inbounds,
    reply=st.none() | pending_replies,
    state=st.sampled_from(list(ParkState)),
    retries=ints,
)

pending_runs = st.builds(
    PendingRun,
    kind=st.sampled_from(sorted(RUN_KINDS)),
    source_id=texts,
    session_id=texts,
    text=texts,
    target=texts,
    quiet_reply=st.none() | texts,
    subject=texts,
    conversation_channel=texts,
    agent=texts,
)

cron_jobs = st.builds(
    CronJob,
    name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True),
    prompt=texts,
    kind=st.sampled_from(["cron", "every", "at"]),
    spec=texts,
    timezone=texts,
    target=texts,
    created_at=datetimes,
    created_by=texts,
    next_run=st.none() | datetimes,
    last_run=st.none() | datetimes,
    paused=st.booleans(),
    agent=texts,
)

usage_calls = st.fixed_dictionaries(
    {
        "session": texts,
        "model": texts,
        "purpose": texts,
        "prompt": ints,
        "completion": ints,
        "cached": ints,
        "provider": texts,
        "agent": texts,
        "person": texts,
    }
)
"""What one model call reports to the usage ledger (`UsageLedger.record`'s arguments)."""

failovers = st.builds(Failover, at=texts, from_=texts, to=texts, reason=texts)
"""One fall-over of the provider chain, as the ledger keeps the day's."""

tool_calls = st.builds(ToolCall, id=texts, name=texts, arguments=texts)

messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.none() | texts,
    tool_calls=st.lists(tool_calls, max_size=3).map(tuple),
    tool_call_id=st.none() | texts,
    name=st.none() | texts,
    ts=st.none() | texts,
    turn=st.none() | texts,
    attachments=st.lists(attachments, max_size=3).map(tuple),
    by=st.none() | texts,
)
"""History entries as stored (`images`, for the model only, is never stored)."""

questions = st.builds(
    Question,
    id=st.from_regex(r"[0-9a-f]{8}", fullmatch=True),
    session=texts,
    channel=texts,
    tool=texts,
    arguments=texts,
    args_sha256=texts,
    asked_at=datetimes,
    deadline=datetimes,
    state=st.sampled_from(list(QuestionState)),
    by=st.none() | texts,
    asked_by=texts,
    agent=texts,
)

always_rules = st.builds(
    AlwaysRule,
    session=texts,
    tool=texts,
    args_sha256=st.none() | texts,
    executable=st.none() | texts,
)

manifests = st.builds(
    Manifest,
    data_format=ints,
    squidd=texts,
    created_at=texts,
    secrets=st.booleans(),
    files=st.lists(st.builds(Entry, name=texts, size=ints, sha256=texts), max_size=3).map(tuple),
)
"""A backup's manifest."""

audit_entries = st.builds(
    AuditEntry,
    time=texts,
    session=texts,
    channel=texts,
    tool=texts,
    args_sha256=texts,
    preview=texts,
    decision=st.sampled_from(list(Decision)),
    by=st.none() | texts,
    duration_ms=ints,
    result_chars=ints,
    error=st.none() | texts,
    agent=texts,
    person=texts,
)
"""One tool call as the audit log records it."""
