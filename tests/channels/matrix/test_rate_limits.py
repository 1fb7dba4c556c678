"""A whole conversation against a Synapse with its stock rate limits (`rc_message`: 0.2
events/s after a burst of 10), through `squidd run` and the scripted model: streamed
answers, the status reactions, a thread in a group room, `/new`, a burst of three quick
messages, `/stop` during a turn, an approval prompt with the reactions the bot offers on it.
The bot's messages, edits, reactions and redactions all spend from one rate budget: the
homeserver refuses none of its requests with 429, every message is answered once (quick ones
as one turn) and ends with ✅, and the ✅ that answered the prompt gets no mark of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from nio import ReactionEvent

from squidd.gateway.conversations import STOPPED
from tests.servers.synapse.server import SynapseServer
from tests.support.config import write_daemon_config
from tests.support.fake_llm import Reply
from tests.support.matrix import Human
from tests.support.matrix_daemon import MatrixScene
from tests.support.matrix_streams import answer_text, stock_synapse, streamed

# One worker runs the whole module: it starts the module's own homeserver once.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.matrix,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.xdist_group("stock-synapse-rate-limits"),
]

STORY = answer_text(20).rstrip()
SHELL = Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})])
WAIT = 300  # the budget makes the bot wait 5 s per event once its burst is spent


@pytest.fixture(scope="module")
def synapse() -> Iterator[SynapseServer]:
    """A homeserver of its own for this module, with Synapse's stock rate limits."""
    with stock_synapse() as server:
        yield server


class Model:
    """The scripted model: long stories streamed slowly, a shell call that needs approval,
    an essay held until the test lets it go, an echo for everything else."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        last = messages[-1] if messages else {}
        users = [m for m in messages if m.get("role") == "user"]
        text = str(users[-1]["content"]) if users else ""
        if last.get("role") == "tool":
            return Reply(content="done: the command ran")
        if "story" in text:
            return Reply(content=STORY, piece_chars=40, piece_delay=0.25)
        if "run it" in text:
            return SHELL
        if "essay" in text and not self.held.is_set():
            self.held.set()
            self.release.wait(WAIT)
            return Reply(content="too late")
        return Reply(content=f"echo: {text[-60:]}")


def in_thread(root: str) -> dict[str, Any]:
    relation = {"rel_type": "m.thread", "event_id": root, "is_falling_back": True}
    return {"m.relates_to": {**relation, "m.in_reply_to": {"event_id": root}}}


def marks(human: Human, bot: str, event_id: str, key: str) -> int:
    return sum(
        1
        for s in human.events
        if isinstance(s.event, ReactionEvent)
        and s.event.sender == bot
        and s.event.reacts_to == event_id
        and s.event.key == key
    )


async def answered(human: Human, bot: str, event_id: str, what: str, count: int = 1) -> None:
    await human.wait_for(lambda: len(human.replies_to(bot, event_id)) >= count, what, WAIT)


async def test_a_busy_conversation_gets_no_429(
    scene: MatrixScene,
) -> None:
    model = Model()
    scene.fake_llm.responder = model
    alice = await scene.make_human("alice")
    bob = await scene.make_human("bob")
    group = await alice.create_room([scene.bot.user_id, bob.user_id])
    await bob.join(group)
    (scene.tmp_path / "ws").mkdir()
    config = write_daemon_config(
        scene.tmp_path,
        scene.fake_llm.base_url,
        api_key="sk-test-matrix-rate-0001",
        gateway={"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 1.0},
        agents={"workspace": str(scene.tmp_path / "ws")},
        matrix={
            "enabled": True,
            "homeserver": scene.synapse.url,
            "user_id": scene.bot.user_id,
            "password": scene.bot.password,
            "allowed_users": [alice.user_id, bob.user_id],
            "open_rooms": [group],
            "sync_timeout_s": 5,
            "debounce_ms": 0,  # each of the quick messages is answered on its own
            **scene.synapse.bot_rate,  # the defaults: Synapse's stock rc_message
        },
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"default_deny": []},
            "tools.approval": {"approvers": [alice.user_id], "timeout_s": 600},
        },
    )
    started = time.monotonic()
    daemon = await scene.matrix_squidd.again(config, "squidd.log")
    dm = await alice.room_with(scene.bot.user_id)
    asked: list[str] = []  # every message that needs one answer

    async def ask(room: str, text: str, **extra: Any) -> str:
        event_id = await alice.send(room, text, **extra)
        asked.append(event_id)
        return event_id

    # A streamed answer in the direct chat.
    story = await ask(dm, "tell me a story")
    await alice.wait_for(
        lambda: bool(streamed(alice, scene.bot.user_id, dm, story).complete(STORY)), "story 1", WAIT
    )
    # A burst of three quick messages (those that come while a turn runs are answered with
    # the next one, as one turn).
    burst = [await alice.send(dm, f"quick {n}") for n in range(3)]
    await answered(alice, scene.bot.user_id, burst[-1], "the answer to the quick messages")
    # An approval prompt, answered with the ✅ the bot offers on it.
    run = await alice.send(dm, "run it")
    await answered(alice, scene.bot.user_id, run, "the approval prompt")
    prompt = alice.replies_to(scene.bot.user_id, run)[0].event.event_id
    await alice.wait_for(
        lambda: all(marks(alice, scene.bot.user_id, prompt, k) for k in ("✅", "♾️", "❌")),
        "the reactions offered on the prompt",
        WAIT,
    )
    relates = {"rel_type": "m.annotation", "event_id": prompt, "key": "✅"}
    answer = await alice.send_event(dm, "m.reaction", {"m.relates_to": relates})
    await answered(alice, scene.bot.user_id, run, "the answer after the approval", count=2)

    # /new, then another streamed answer.
    await answered(alice, scene.bot.user_id, await ask(dm, "/new"), "the /new confirmation")
    story2 = await ask(dm, "another story please")
    await alice.wait_for(
        lambda: bool(streamed(alice, scene.bot.user_id, dm, story2).complete(STORY)),
        "story 2",
        WAIT,
    )
    # A thread in the group room.
    root = await ask(group, "trip planning")
    await answered(alice, scene.bot.user_id, root, "the answer in the room")
    for text in ("what about hotels?", "and trains?"):
        await answered(alice, scene.bot.user_id, await ask(group, text, **in_thread(root)), text)
    # /stop during a turn.
    essay = await ask(dm, "write me an essay")
    try:
        assert await anyio.to_thread.run_sync(model.held.wait, WAIT), "the model was not asked"
        stop = await ask(dm, "/stop")
        await answered(alice, scene.bot.user_id, stop, "the /stop answer")
        await answered(alice, scene.bot.user_id, essay, "the stopped turn's notice")
    finally:
        model.release.set()
    everything = [*asked, *burst, run]
    await alice.wait_for(
        lambda: all(marks(alice, scene.bot.user_id, e, "✅") == 1 for e in everything),
        "a ✅ on every message",
        WAIT,
    )
    seconds = time.monotonic() - started
    assert await daemon.stop() == 0

    requests = scene.synapse.requests(scene.bot.user_id)
    limited = [r for r in requests if "/send/" in r[0] or "/redact/" in r[0]]
    refused = [r for r in requests if r[1] == 429]
    print(
        f"{len(limited)} rate-limited requests ({len(requests)} in all) in {seconds:.0f} s;"
        f" {len(refused)} x 429; 👀 left out: {daemon.count('matrix_status_reaction_skipped')}"
    )
    assert limited, "the access log shows the bot's sends"
    assert refused == []
    for event_id in asked:
        assert len(alice.replies_to(scene.bot.user_id, event_id)) == 1, event_id
    assert [len(alice.replies_to(scene.bot.user_id, e)) for e in burst][-1] == 1
    assert all(len(alice.replies_to(scene.bot.user_id, e)) <= 1 for e in burst)
    assert [s.content["body"] for s in alice.replies_to(scene.bot.user_id, essay)] == [STOPPED]
    assert alice.replies_to(scene.bot.user_id, run)[1].content["body"] == "done: the command ran"
    assert not [k for k in ("👀", "✅", "❌") if marks(alice, scene.bot.user_id, answer, k)]
