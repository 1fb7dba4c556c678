"""An operator's unit file names the model; a crash left a damaged line in a history."""

from __future__ import annotations

from pathlib import Path

from squidd.core.models import SessionId
from squidd.fs import append_lines_locked
from squidd.store.jsonl import JsonlStore
from tests.support.fake_llm import FakeLLM
from tests.support.spool_daemon import Daemon, ask, spool_config, start_ready
from tests.support.spool_daemon import daemons as daemons

SESSION = SessionId("spool-s1")  # the session tests/support/spool_daemon.py's messages use


def skipped(daemon: Daemon) -> list[dict[str, object]]:
    return [e for e in daemon.events() if e.get("event") == "history_line_skipped"]


def test_the_units_model_is_used_and_a_damaged_line_is_reported_once_per_process(
    tmp_path: Path, fake_llm: FakeLLM, daemons: list[Daemon]
) -> None:
    """Sam runs squidd as a service; the unit file says `Environment=SQUIDD_LLM__MODEL=...`
    over the model his config file names, as the docs tell him to. Some time ago the disk
    filled mid-write and one line of his conversation's history is garbage. He asks three
    questions: each is answered once, every call asks the model the unit named, and the
    damaged line is reported once, not at every turn. systemd restarts the service (SIGTERM,
    then a new process): his next question is answered with his earlier ones in view, and
    the new process reports the damaged line once too."""
    config = spool_config(tmp_path, fake_llm.base_url)
    data = tmp_path / "data"
    unit = {"SQUIDD_LLM__MODEL": "model-from-the-unit"}
    daemon = start_ready(tmp_path, config, daemons, **unit)
    assert [r["text"] for r in ask(data, "q1", "is the bakery open?")] == [
        "echo: is the bakery open?"
    ]
    append_lines_locked(JsonlStore(data).history_path(SESSION), ['{"role": "user", "cont'])
    for number, question in ((2, "and on sunday?"), (3, "what about monday?")):
        assert [r["text"] for r in ask(data, f"q{number}", question)] == [f"echo: {question}"]
    assert len(skipped(daemon)) == 1

    assert daemon.terminate() == 0
    again = start_ready(tmp_path, config, daemons, **unit)
    assert [r["text"] for r in ask(data, "q4", "thanks!")] == ["echo: thanks!"]
    assert len(skipped(again)) == 1

    requests = fake_llm.chat_requests
    assert [r["model"] for r in requests] == ["model-from-the-unit"] * 4
    seen = [str(m.get("content")) for m in requests[-1]["messages"] if m["role"] == "user"]
    assert seen[-4:] == ["is the bakery open?", "and on sunday?", "what about monday?", "thanks!"]
