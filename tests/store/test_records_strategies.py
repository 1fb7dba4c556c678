"""The record strategies vary every stored field: a field a strategy left at its default
would never be seen lost by the round-trip tests (a field added to a record and not to
its strategy, say). Each field with a default must take another value in some example."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import Phase, find, settings
from hypothesis import strategies as st

from squidd.core.approvals import AlwaysRule, Question
from squidd.core.audit import AuditEntry
from squidd.core.cron import CronJob
from squidd.core.models import Attachment, Inbound, Message, PendingReply
from squidd.core.poison import Parked
from squidd.core.runs import PendingRun
from squidd.store.records import INBOUND, MESSAGE
from tests.support.records import (
    always_rules,
    attachments,
    audit_entries,
    cron_jobs,
    inbounds,
    messages,
    parked_items,
    pending_replies,
    pending_runs,
    questions,
)

NOT_STORED = {Inbound: set(INBOUND.not_stored), Message: set(MESSAGE.not_stored)}

CASES: list[tuple[type[Any], st.SearchStrategy[Any]]] = [
    (Inbound, inbounds),
    (Parked, parked_items),
    (PendingReply, pending_replies),
    (Attachment, attachments),
    (Message, messages),
    (PendingRun, pending_runs),
    (CronJob, cron_jobs),
    (Question, questions),
    (AlwaysRule, always_rules),
    (AuditEntry, audit_entries),
]


def _defaulted(cls: type[Any]) -> list[tuple[str, Any]]:
    found = []
    for field in dataclasses.fields(cls):
        if field.name in NOT_STORED.get(cls, set()):
            continue
        if field.default is not dataclasses.MISSING:
            found.append((field.name, field.default))
        elif field.default_factory is not dataclasses.MISSING:
            found.append((field.name, field.default_factory()))
    return found


@pytest.mark.parametrize(("cls", "strategy"), CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_every_stored_field_with_a_default_is_varied(
    cls: type[Any], strategy: st.SearchStrategy[Any]
) -> None:
    for name, default in _defaulted(cls):
        find(
            strategy,
            lambda record, name=name, default=default: getattr(record, name) != default,
            settings=settings(database=None, max_examples=500, phases=[Phase.generate]),
        )
