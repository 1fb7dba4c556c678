"""A homeserver with Synapse's stock rate limits, and what a person sees of a streamed
answer: the bot's message that replies to theirs, the `m.replace` edits of it, and the text
the answer shows in the end."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.servers.synapse.server import SynapseServer
from tests.support.matrix import Human, Seen
from tests.support.servers import running_synapse


def answer_text(sentences: int) -> str:
    """A long markdown answer (with some bold, so it has a formatted body)."""
    line = "Sentence {} of the **streamed** answer, written piece by piece."
    return "\n\n".join(line.format(i) for i in range(sentences))


@contextmanager
def stock_synapse() -> Iterator[SynapseServer]:
    """A second homeserver, started with Synapse's default rate limits, stopped by PID."""
    with running_synapse("squidd-synapse-stock-", stock_limits=True) as server:
        yield server


@dataclass
class Streamed:
    """The bot's messages in one room: the reply(ies) to `asked` and the edits of each."""

    replies: list[Seen]
    edits: dict[str, list[Seen]]
    others: list[Seen]

    def shown(self, event_id: str) -> str:
        """The text the message shows now: its last edit's new content, else its own."""
        edits = self.edits.get(event_id, [])
        if edits:
            new: dict[str, Any] = edits[-1].content.get("m.new_content", {})
            return str(new.get("body", ""))
        [reply] = [r for r in self.replies if r.event.event_id == event_id]
        return str(reply.content.get("body", ""))

    def complete(self, text: str) -> list[str]:
        """The replies that show `text` whole."""
        return [r.event.event_id for r in self.replies if self.shown(r.event.event_id) == text]


def streamed(human: Human, bot: str, room: str, asked: str) -> Streamed:
    replies: list[Seen] = []
    edits: dict[str, list[Seen]] = {}
    others: list[Seen] = []
    for seen in human.from_sender(bot, room):
        relation = seen.content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            edits.setdefault(str(relation.get("event_id")), []).append(seen)
        elif (relation.get("m.in_reply_to") or {}).get("event_id") == asked:
            replies.append(seen)
        else:
            others.append(seen)
    return Streamed(replies, edits, others)
