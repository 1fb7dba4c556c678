"""Typed routing values: where an answer goes, and the records the gateway keeps on disk."""

from __future__ import annotations

from squidd.core.models import (
    Attachment,
    Destination,
    Inbound,
    InboundKind,
    SessionId,
)


def test_destination_defaults_to_the_sender_on_the_same_channel() -> None:
    message = Inbound("email", "<a@x>", SessionId("a@x.org"), "a@x.org", "hi")
    assert message.destination == Destination("email", "a@x.org")


def test_reply_to_overrides_the_sender() -> None:
    room = Destination("matrix", "!room:example.org")
    message = Inbound("matrix", "$e", SessionId("!room:example.org"), "@u:x", "hi", reply_to=room)
    assert message.destination == room


def test_no_sender_and_no_reply_to_delivers_nowhere() -> None:
    assert Inbound("cron", "job@t", SessionId("cron:job"), "", "prompt").destination is None


def test_a_channel_message_is_a_message_and_runs_under_its_own_channel() -> None:
    message = Inbound("subagent_report", "$e", SessionId("s"), "@u:x", "hi")
    assert message.kind is InboundKind.MESSAGE
    assert message.turn_channel == "subagent_report"  # a channel's name decides nothing
    run = Inbound("x", "matrix:1", SessionId("s"), "", "t", conversation_channel="matrix")
    assert run.turn_channel == "matrix"


def test_cleaned_makes_every_routing_field_valid_text() -> None:
    lone = "\ud800"
    message = Inbound(
        "matrix",
        f"$e{lone}",
        SessionId(f"!r{lone}:x"),
        f"@u{lone}:x",
        f"hi{lone}\x00",
        reply_to=Destination("matrix", f"!r{lone}:x"),
        thread_root=f"$t{lone}",
        subject=f"s{lone}",
        meta={"name": f"n{lone}", "count": 3},
    )
    clean = message.cleaned()
    fields = [
        clean.source_id,
        clean.session_id,
        clean.sender,
        clean.text,
        clean.thread_root,
        clean.subject,
        clean.meta["name"],
        str(clean.destination),
    ]
    for value in fields:
        assert value is not None
        value.encode("utf-8")  # raises on a lone surrogate
        assert "\x00" not in value
    assert clean.meta["count"] == 3


def test_cleaned_makes_attachment_names_and_types_valid_text() -> None:
    attachment = Attachment("file", "re\x1bport\ud800\x00.pdf", "application/pdf\x07", 3)
    message = Inbound("c", "id", SessionId("s"), "u", "", attachments=(attachment,))
    [clean] = message.cleaned().attachments
    assert (clean.name, clean.mime, clean.size) == ("report\ufffd.pdf", "application/pdf", 3)
