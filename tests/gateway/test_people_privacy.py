"""Privacy between the people who share one assistant (memory per person), checked with a
canary over every request the scripted model received.

Alice asks the assistant ("home", the default agent) to remember a canary in her direct
chat. Bob's turns (his direct chat, his search across his history, his recall), the group
room's turns (Alice's and Bob's), Bob's sub-agent and every turn of the second agent
("work", Alice's own included: agents are apart) never see it; Alice's next private turn
with home does. Each person's memory
is their own file; the shared MEMORY.md is what the group room reads and writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from squidd.fs import safe_name
from tests.support.config import provider
from tests.support.fake_embeddings import EmbeddingsServer
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

CANARY = "CANARY-7f3e"
SAID = f"Alice sees Dr Lindqvist on thursday {CANARY}"
QUERY = "Lindqvist"  # finds what she said, without being the canary itself


def _last_user(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m["role"] == "user"]
    return str(users[-1]["content"]) if users else ""


def _model(request: dict[str, Any]) -> Reply:
    """Writes memory or searches when asked to, answers plainly after a tool's result."""
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(content="done")
    tag, _, said = _last_user(request).partition("] ")
    if said.startswith("remember "):
        return Reply(tool_calls=[("memory_write", {"content": said.removeprefix("remember ")})])
    for word, tool in (("search ", "search_all_history"), ("recall ", "recall")):
        if said.startswith(word):
            names = [t["function"]["name"] for t in request.get("tools", [])]
            if tool not in names:
                return Reply(content=f"no {tool} here")
            return Reply(tool_calls=[(tool, {"query": said.removeprefix(word)})])
    if said.startswith("spawn "):
        task = f"{tag}] {said.removeprefix('spawn ')}"
        return Reply(tool_calls=[("spawn", {"task": task, "wait": True})])
    return Reply(content="ok")


def _tag(request: dict[str, Any]) -> str:
    """The conversation a request belongs to: every message the test sends starts with its
    conversation's tag, and so does a sub-agent's task."""
    return _last_user(request).split("]", 1)[0] + "]"


async def test_a_canary_alice_asked_to_remember_reaches_no_one_else(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FakeLLM(responder=_model) as llm, EmbeddingsServer() as emb:
        settings = make_settings(
            data,
            llm.base_url,
            llm={
                "providers": [provider("A", llm), {"name": "emb", "base_url": emb.base_url}],
                "chain": ["A/model-a"],
            },
            memory={"recall": {"embeddings": f"emb/{emb.model}", "every_s": 0.05}},
            agents={"memory_scope": "person", "list": [{"name": "home"}, {"name": "work"}]},
            tools={"search_history_across_sessions": True},
            people=[
                {"name": "alice", "ids": ["@alice:example.org", "alice@example.org"]},
                {"name": "bob", "ids": ["@bob:example.org"]},
            ],
        )
        channel = MemoryChannel("memory")
        steps = [
            (f"remember {SAID}", "dm-alice", "@alice:example.org", False),
            ("what do you know about me?", "dm-alice", "alice@example.org", False),
            ("hello, what do you know?", "dm-bob", "@bob:example.org", False),
            (f"search {QUERY}", "dm-bob", "@bob:example.org", False),
            (f"recall {QUERY}", "dm-bob", "@bob:example.org", False),
            ("spawn summarise what you know", "dm-bob", "@bob:example.org", False),
            ("remember the family cat is Olaf", "room", "@bob:example.org", True),
            ("what do we know?", "room", "@alice:example.org", True),
            (f"search {QUERY}", "room", "@alice:example.org", True),
            (f"search {QUERY}", "dm-alice", "@alice:example.org", False),
            ("what do you know about me?", "work-alice", "@alice:example.org", False),
            (f"search {QUERY}", "work-alice", "@alice:example.org", False),
            (f"recall {QUERY}", "work-alice", "@alice:example.org", False),
            (f"recall {QUERY}", "work-bob", "@bob:example.org", False),
        ]
        async with running_daemon(settings, [channel]):
            for number, (text, session, sender, group) in enumerate(steps, 1):
                channel.inject(
                    f"[{session}] {text}",
                    session=session,
                    source_id=f"m{number}",
                    sender=sender,
                    group=group,
                    agent="work" if session.startswith("work-") else "",
                )
                await channel.wait_for(number, what="acked")
    with_canary = [r for r in llm.chat_requests if CANARY in json.dumps(r)]
    # Only Alice's private conversation ever carried it: her memory, her search's result.
    assert with_canary and {_tag(r) for r in with_canary} == {"[dm-alice]"}
    by_tag = {_tag(r) for r in llm.chat_requests}
    assert {"[dm-bob]", "[room]", "[dm-alice]", "[work-alice]", "[work-bob]"} <= by_tag
    # Recall ran where asked (Bob's, and both people's with work) and found nothing of hers.
    recalled = [
        r
        for r in llm.chat_requests
        if r["messages"][-1]["role"] == "tool" and "recall" in _last_user(r)
    ]
    assert {_tag(r) for r in recalled} == {"[dm-bob]", "[work-alice]", "[work-bob]"}
    # Alice's second private turn (from her email id: the same person) read her memory.
    [again] = [
        r
        for r in llm.chat_requests
        if _last_user(r).endswith("about me?") and _tag(r) == "[dm-alice]"
    ]
    assert CANARY in again["messages"][0]["content"]
    # Bob's search was offered and ran over his conversations only; the room got none.
    bob_search = [
        r
        for r in llm.chat_requests
        if _tag(r) == "[dm-bob]" and r["messages"][-1]["role"] == "tool"
    ]
    assert any("No messages found" in str(r["messages"][-1]["content"]) for r in bob_search)
    room_tools = {
        t["function"]["name"]
        for r in llm.chat_requests
        if _tag(r) == "[room]"
        for t in r.get("tools", [])
    }
    assert "search_all_history" not in room_tools
    # The files: Alice's own, the shared one with the room's fact only.
    workspace = data / "workspace"
    mine = (workspace / "people" / safe_name("alice") / "MEMORY.md").read_text()
    assert CANARY in mine
    shared = (workspace / "MEMORY.md").read_text()
    assert "Olaf" in shared and CANARY not in shared
    assert not (workspace / "people" / safe_name("bob")).exists()  # Bob never wrote his


async def test_one_person_keeps_the_shared_memory_as_before(tmp_path: Path) -> None:
    with FakeLLM(responder=_model) as llm:
        settings = make_settings(tmp_path / "data", llm.base_url)  # "auto", one person
        channel = MemoryChannel("memory")
        async with running_daemon(settings, [channel]):
            channel.inject("[s] remember the owner likes tea", session="s", source_id="m1")
            await channel.wait_for(1, what="acked")
    assert "tea" in (tmp_path / "data" / "workspace" / "MEMORY.md").read_text()
