"""A household writes to its bot at the same moment: the turns run at once (the default turn
cap), one person stops hers while it streams, and the daemon is killed the moment the last
answer shows, then started again."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from squidd.gateway.conversations import STOPPED
from tests.support.fake_llm import Gate, Reply
from tests.support.matrix import Human, start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, handled_ids, matrix_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

PEOPLE = 10  # more than the turn cap squidd had before its default was measured (8)


def dinner(name: str) -> str:
    return (f"Dinner for {name}: " + "soup, then bread and cheese, then an apple. " * 4).rstrip()


class Model:
    """The scripted model: every first question's answer streams up to the gate and waits
    there until the test opens it; a later question is answered at once, naming how many of
    the person's own questions the prompt held."""

    def __init__(self) -> None:
        self.gate = Gate()
        self.lock = threading.Lock()
        self.seen: list[list[str]] = []  # each request's user texts

    def __call__(self, request: dict[str, Any]) -> Reply:
        users = [str(m.get("content")) for m in request["messages"] if m["role"] == "user"]
        with self.lock:
            self.seen.append(users)
        last = users[-1] if users else ""
        name = last.rsplit(" ", 1)[-1].rstrip("?")
        if last.startswith("what's for dinner"):
            return Reply(content=dinner(name), piece_chars=12, gate=self.gate, gate_after=30)
        return Reply(content=f"Dessert for {name}, after {len(users)} questions.")


async def test_ten_people_at_once_one_stops_then_a_kill(scene: MatrixScene) -> None:
    """Ten people of one household each ask the bot what is for dinner in their own chat, at
    the same moment. The model is asked ten times before any answer is finished: no one
    waits behind the others. While the answers stream, the first of them changes her mind and
    sends `/stop`: she is told so and her answer ends with the stopped notice. The other nine
    answers stream whole, each once. The daemon is killed the moment the last one shows and
    started again: nothing is answered a second time, and each person's next question is
    answered with her own earlier one in the prompt, never another's."""
    model = Model()
    scene.fake_llm.responder = model
    people: list[Human] = [
        await scene.make_human(f"p{n}", cross_signed=False) for n in range(PEOPLE)
    ]
    names = [person.user_id.split(":")[0].lstrip("@") for person in people]
    config = matrix_config(
        scene.tmp_path,
        scene.fake_llm.base_url,
        scene.synapse,
        scene.bot,
        [person.user_id for person in people],
        # The household's own homeserver lets the bot send as fast as it answers (the test
        # Synapse's raised limits); on stock limits its budget would space the ten replies
        # 5 s apart once its burst is spent (tests/channels/matrix/test_rate_limits.py).
        matrix=scene.synapse.bot_rate,
    )
    daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd.log")
    rooms = [await person.room_with(scene.bot.user_id) for person in people]
    chats = [Chat(p, scene.bot.user_id, r) for p, r in zip(people, rooms, strict=True)]

    asked = [
        await person.send(room, f"what's for dinner, {name}?")
        for person, room, name in zip(people, rooms, names, strict=True)
    ]
    first = people[0]
    await first.wait_for(
        lambda: len(scene.fake_llm.chat_requests) >= PEOPLE,
        "the model asked by all ten turns, none finished",
        120,
    )
    assert not model.gate.release.is_set()
    assert all(dinner(n) not in chat.texts() for n, chat in zip(names, chats, strict=True))

    stop = await first.send(rooms[0], "/stop")
    assert await chats[0].wait_reply(stop, timeout=120) == "Stopped the turn that was running."
    assert await chats[0].wait_reply(asked[0], timeout=120) == STOPPED
    model.gate.release.set()
    for n in range(1, PEOPLE):  # each streamed answer whole (its last edit shown)
        await chats[n].wait_text(dinner(names[n]), timeout=120)
    daemon.kill()

    daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd-2.log")
    later = [
        await person.send(room, f"and dessert, {name}?")
        for person, room, name in zip(people, rooms, names, strict=True)
    ]
    for n in range(PEOPLE):
        answer = await chats[n].wait_reply(later[n], timeout=120)
        assert answer.startswith(f"Dessert for {names[n]}, after "), answer
    assert await daemon.stop() == 0

    for n, chat in enumerate(chats):
        assert len(chat.replies(asked[n])) == 1, chat.texts()
        assert len(chat.replies(later[n])) == 1, chat.texts()
        assert chat.containing("Dinner for") == ([] if n == 0 else [dinner(names[n])])
    desserts = [users for users in model.seen if users and users[-1].startswith("and dessert")]
    assert len(desserts) == PEOPLE
    for users in desserts:
        name = users[-1].rsplit(" ", 1)[-1].rstrip("?")
        assert users == [f"what's for dinner, {name}?", f"and dessert, {name}?"], users
    handled = handled_ids(scene.tmp_path / "data")
    assert len(handled) == len(set(handled))
