"""R6, Matrix: a room message whose turn runs a shell command (appending a line to a file),
the real daemon SIGKILLed at each point of the turn (tests/faults/journal_support.py) against
the real Synapse, then started again: the message comes back (the sync position was not
confirmed) and its turn resumes from the journal. The line is written once, or once and the
model told the outcome is unknown; one reply reaches the room; the turn is in the history
once; a recorded model answer is never asked for again. Killed after the reply was stored for
delivery and before the send, the restart sends the stored reply, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.faults.journal_support import (
    DONE,
    POINTS,
    check_turn,
    cut_at,
    history,
    journals,
    model_for,
    poll,
    shell_sections,
)
from tests.support.crash_points import crash_env
from tests.support.daemon import DaemonProcess
from tests.support.matrix_daemon import MatrixScene, matrix_daemon_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow, pytest.mark.timeout(300)]

MakeHuman = Callable[..., Any]


@pytest.mark.parametrize("point", POINTS)
async def test_a_matrix_turn_cut_short_resumes_from_its_journal(
    point: str,
    scene: MatrixScene,
) -> None:
    path = scene.tmp_path / "lines.txt"
    model = model_for(point, path)
    scene.fake_llm.responder = model
    data = scene.tmp_path / "data"
    (data / "workspace").mkdir(parents=True)  # the shell's working directory
    alice = await scene.make_human("alice")
    config = matrix_daemon_config(
        scene.tmp_path,
        scene.fake_llm,
        scene.synapse,
        scene.bot,
        alice.user_id,
        **shell_sections("matrix"),
    )
    room = ""
    asked = ""

    async def start(crash_after: str = "") -> DaemonProcess:
        env = crash_env(crash_after)
        daemon = scene.matrix_squidd.spawn(
            config, f"squidd-{len(scene.matrix_squidd.squidds)}.log", env
        )
        await daemon.wait_event("matrix_connected")
        return daemon

    async def send() -> None:
        nonlocal room, asked
        room = await alice.room_with(scene.bot.user_id)
        asked = await alice.send(room, "append the line")

    await cut_at(point, model, path, start, send)
    await start()
    await alice.wait_for(lambda: bool(alice.replies_to(scene.bot.user_id, asked)), "the reply", 120)
    await poll(lambda: not journals(data), "the journal removed after delivery")
    await alice.sync()
    assert [r.content["body"] for r in alice.replies_to(scene.bot.user_id, asked)] == [DONE]
    check_turn(point, path, scene.fake_llm.chat_requests, history(data, room))
