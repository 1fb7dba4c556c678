"""R3: the model fails 30% of the time (5xx, a timeout, a stream broken mid-reply). Every
turn still ends in an answer or the short apology, each message is answered once, its user
message is in the session's history, and the daemon stays up through all of it."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squidd.core.router import APOLOGY
from tests.faults.harness import Counts, SpoolDaemon, new_id, seeded, wait_until
from tests.support.fake_llm import FakeLLM, Reply

MESSAGES = 60
SESSIONS = 4
TIMEOUT_S = 0.5


class FaultyModel:
    """Echoes the last user message, or (30%) fails in one of three ways, by a seeded draw."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lock = threading.Lock()
        self.faults: Counter[str] = Counter()

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = next(
            str(m.get("content") or "")
            for m in reversed(request["messages"])
            if m.get("role") == "user"
        )
        with self.lock:
            draw = self.rng.random()
        if draw < 0.1:
            self.faults["5xx"] += 1
            return Reply(status=500 if draw < 0.05 else 503)
        if draw < 0.2:
            self.faults["timeout"] += 1
            return Reply(content=f"late: {text}", delay=TIMEOUT_S * 4)
        if draw < 0.3:
            self.faults["broken_stream"] += 1
            return Reply(content=f"cut: {text} " + "x" * 200, cut_after=14)
        return Reply(content=f"echo: {text}")


@pytest.mark.slow
def test_every_turn_ends_in_an_answer_or_apology(tmp_path: Path) -> None:
    rng = seeded("R3")
    model = FaultyModel(rng)
    with FakeLLM(responder=model) as llm:
        daemon = SpoolDaemon(
            tmp_path,
            llm.base_url,
            api_key="sk-test-faults-r3-0001",
            llm={"timeout_s": TIMEOUT_S, "connect_timeout_s": TIMEOUT_S},
        )
        try:
            run = daemon.start()
            sent: dict[str, tuple[str, str]] = {}
            for i in range(MESSAGES):
                message_id = f"m{i:03d}-{new_id()}"
                text = f"question {i} {new_id()}"
                session = f"r3-session-{rng.randrange(SESSIONS)}"
                sent[message_id] = (text, session)
                daemon.send(message_id, text, session)
            wait_until(
                lambda: daemon.pending() == 0 and len(daemon.answers()) >= MESSAGES,
                "every message answered",
            )
            still_up = run.proc.poll() is None
            replies = {r["file"].split(".")[0]: r["text"] for r in daemon.replies()}
            counts = Counts("R3", extra={k: model.faults[k] for k in sorted(model.faults)})
            counts.tally(sent, daemon.answers())
            events = daemon.log_events()
            counts.crashes = sum(1 for e in events if e.get("event") == "turn_crashed") + (
                0 if still_up else 1
            )
            counts.report()
            assert still_up, run.log_text()[-3000:]
            assert counts.lost == 0 and counts.duplicates == 0
            assert counts.crashes == 0
            assert sum(model.faults.values()) > 0
            for message_id, (text, session) in sent.items():
                reply = replies[message_id]
                assert reply in (APOLOGY, f"echo: {text}"), (message_id, reply)
                history = daemon.history(session)
                users = [m.get("content") for m in history if m.get("role") == "user"]
                assert text in users, (message_id, session)
        finally:
            daemon.close()
