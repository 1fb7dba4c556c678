"""Scheduled runs: their kind and conversation channel survive the disk (store/pending_runs.py),
files written by older versions get both from the channel name, and each run's inbound
carries them."""

from __future__ import annotations

from typing import Any

import pytest

from squidd.core.models import Destination, InboundKind
from squidd.core.runs import PendingRun
from squidd.store.pending_runs import dump_run, load_run


async def _ack() -> None:
    return None


def test_pending_run_round_trip_and_its_inbound() -> None:
    run = PendingRun(
        InboundKind.HEARTBEAT, "heartbeat@t", "heartbeat", "check", "matrix:!r:x", quiet_reply="OK"
    )
    again = load_run(dump_run(run))
    assert again == run
    inbound = again.inbound(ack=_ack)
    assert inbound.channel == "heartbeat"
    assert inbound.kind is InboundKind.HEARTBEAT
    assert inbound.turn_channel == "heartbeat"
    assert inbound.reply_to == Destination("matrix", "!r:x")
    assert inbound.quiet_reply == "OK"
    assert inbound.sender == ""


def test_a_sub_agent_report_carries_its_conversation_channel() -> None:
    run = PendingRun(
        InboundKind.SUBAGENT_REPORT,
        "email:0a1b",
        "alice@example.org",
        "report",
        "email:alice@example.org",
        conversation_channel="email",
    )
    data = dump_run(run)
    assert (data["kind"], data["channel"]) == ("subagent_report", "subagent_report")
    inbound = load_run(data).inbound(ack=_ack)
    assert inbound.kind is InboundKind.SUBAGENT_REPORT
    assert inbound.channel == "subagent_report"  # its handled id and file name are unchanged
    assert inbound.turn_channel == "email"


def test_only_scheduled_kinds_are_runs() -> None:
    for kind in (InboundKind.MESSAGE, InboundKind.NOTICE):
        with pytest.raises(ValueError):
            PendingRun(kind, "s", "s", "t", "")
    with pytest.raises(ValueError):
        load_run({"kind": "lunch", "source_id": "s", "session_id": "s", "text": "t"})


# What the version before `kind` wrote: the typed routing fields, no kind, no conversation.
BEFORE_KIND: list[tuple[dict[str, Any], InboundKind, str]] = [
    (
        {"channel": "cron", "source_id": "nightly@t", "session_id": "cron:nightly"},
        InboundKind.CRON,
        "cron",
    ),
    (
        {"channel": "heartbeat", "source_id": "heartbeat@t", "session_id": "heartbeat"},
        InboundKind.HEARTBEAT,
        "heartbeat",
    ),
    (
        {"channel": "subagent", "source_id": "matrix:0a1b", "session_id": "!r:x/sub:0a1b"},
        InboundKind.SUBAGENT,
        "matrix",
    ),
    (
        {"channel": "subagent_report", "source_id": "email:0a1b", "session_id": "a@x.org"},
        InboundKind.SUBAGENT_REPORT,
        "email",
    ),
]


@pytest.mark.parametrize(("fields", "kind", "turn_channel"), BEFORE_KIND)
def test_a_run_written_before_kind_gets_it_from_its_channel(
    fields: dict[str, Any], kind: InboundKind, turn_channel: str
) -> None:
    data = {**fields, "text": "t", "target": "", "quiet_reply": None, "subject": ""}
    run = load_run(data)
    assert run.kind is kind
    assert run.channel == fields["channel"]
    inbound = run.inbound(ack=_ack)
    assert inbound.kind is kind
    assert inbound.turn_channel == turn_channel
    # Written again, it keeps its identity (channel and source id) and says its kind.
    assert load_run(dump_run(run)) == run


def test_pending_run_written_by_an_older_version_keeps_its_routing() -> None:
    """Before the typed fields, a run kept its quiet reply and job name in a meta object."""
    legacy = {
        "channel": "heartbeat",
        "source_id": "heartbeat@t",
        "session_id": "heartbeat",
        "text": "check",
        "target": "",
        "meta": {"quiet_reply": "HEARTBEAT_OK", "target": ""},
    }
    run = load_run(legacy)
    assert run.kind is InboundKind.HEARTBEAT
    assert run.quiet_reply == "HEARTBEAT_OK"
    assert run.inbound(ack=_ack).destination is None
    cron = load_run({**legacy, "channel": "cron", "meta": {"job": "report"}})
    assert cron.kind is InboundKind.CRON
    assert cron.subject == "report"
    assert cron.quiet_reply is None
