"""What the cross-feature scenarios (tests/scenarios) share: a person's bot on the real
servers, configured as a user would (defaults kept unless the story needs otherwise), and
what that person sees of it.

* `matrix_config` / `email_config`: `config.toml` for a `squidd run` child on the test
  Synapse or the test mail servers, with the scripted model, the shell tool (asking before it
  runs) and a workspace folder; `sections` add to or override any section.
* `Chat`: the bot's messages in one Matrix room as the person sees them, a streamed answer
  shown by its last edit.
* `log_in`: the dashboard's login with an API key, the session's CSRF token returned.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx2

from tests.channels.email.mailbox import MailServer, bot_email_section, make_mail
from tests.servers.synapse.server import SynapseServer, User
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess, daemon_env, squidd_argv
from tests.support.dashboard import FORM, csrf_of
from tests.support.matrix import Human, Seen

LLM_KEY = "sk-test-scenarios-0001"
APPROVAL_RE = re.compile(r"Approval needed \(([0-9a-f]{8})\): Run shell: (.*)\?")


def _merged(base: dict[str, dict[str, Any]], sections: dict[str, dict[str, Any]]) -> Any:
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return base


def common_sections(tmp: Path, approvers: list[str]) -> dict[str, dict[str, Any]]:
    """The workspace, quick delivery retries, and the shell tool asking `approvers` first."""
    (tmp / "ws").mkdir(exist_ok=True)
    return {
        "gateway": {"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 1.0},
        "agents": {"workspace": str(tmp / "ws")},
        "tools.shell": {"enabled": True},
        "tools.policy": {"default_deny": []},
        "tools.approval": {"approvers": approvers, "timeout_s": 600},
    }


def matrix_config(
    tmp: Path,
    llm_url: str,
    synapse: SynapseServer,
    bot: User,
    people: list[str],
    **sections: dict[str, Any],
) -> Path:
    """The bot on the test Synapse for `people` (the first approves); Matrix's defaults
    (debounce, streaming in direct chats) unless `sections["matrix"]` changes them."""
    base = common_sections(tmp, people[:1])
    base["matrix"] = {
        "enabled": True,
        "homeserver": synapse.url,
        "user_id": bot.user_id,
        "password": bot.password,
        "allowed_users": people,
        "sync_timeout_s": 5,
        "reconnect_initial_delay_s": 0.2,
        "reconnect_max_delay_s": 1.0,
    }
    return write_daemon_config(tmp, llm_url, api_key=LLM_KEY, **_merged(base, sections))


def email_config(
    tmp: Path,
    llm_url: str,
    server: MailServer,
    bot: str,
    person: str,
    **sections: dict[str, Any],
) -> Path:
    """The bot's mailbox on the test mail servers, `person` allowed and approving."""
    base = common_sections(tmp, [person])
    base["email"] = bot_email_section(server, bot)
    return write_daemon_config(tmp, llm_url, api_key=LLM_KEY, **_merged(base, sections))


def ran(tmp: Path, name: str = "ran.txt") -> int:
    """How many times the story's shell command (`echo ran >> NAME`) ran in the workspace."""
    marker = tmp / "ws" / name
    return len(marker.read_text().splitlines()) if marker.exists() else 0


@dataclass
class Chat:
    """The bot's messages in one room as `human` sees them: each message (not the edits of
    one) with the text it shows now, in order."""

    human: Human
    bot: str
    room: str

    def _edits(self) -> dict[str, list[Seen]]:
        edits: dict[str, list[Seen]] = {}
        for seen in self.human.from_sender(self.bot, self.room):
            relation = seen.content.get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace":
                edits.setdefault(str(relation.get("event_id")), []).append(seen)
        return edits

    def messages(self) -> list[tuple[Seen, str]]:
        edits = self._edits()
        out: list[tuple[Seen, str]] = []
        for seen in self.human.from_sender(self.bot, self.room):
            relation = seen.content.get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace":
                continue
            mine = edits.get(seen.event.event_id, [])
            new = mine[-1].content.get("m.new_content", {}) if mine else seen.content
            out.append((seen, str(new.get("body", ""))))
        return out

    def texts(self) -> list[str]:
        return [text for _, text in self.messages()]

    def replies(self, asked: str) -> list[tuple[Seen, str]]:
        """The bot's messages that reply to the person's event `asked`."""
        return [
            (seen, text)
            for seen, text in self.messages()
            if ((seen.content.get("m.relates_to") or {}).get("m.in_reply_to") or {}).get("event_id")
            == asked
        ]

    def containing(self, needle: str) -> list[str]:
        return [text for text in self.texts() if needle in text]

    async def wait_text(self, needle: str, count: int = 1, timeout: float = 60) -> None:
        await self.human.wait_for(
            lambda: len(self.containing(needle)) >= count, repr(needle), timeout
        )

    async def wait_reply(self, asked: str, count: int = 1, timeout: float = 60) -> str:
        """Until `count` messages reply to `asked` and the last one shows whole (its edits,
        when streamed, arrived); the text of the `count`-th."""
        await self.human.wait_for(
            lambda: len(self.replies(asked)) >= count, f"reply {count} to {asked}", timeout
        )
        return self.replies(asked)[count - 1][1]

    def marks(self, event_id: str) -> set[str]:
        """The keys of the bot's reactions on `event_id` that were not redacted since."""
        events = [seen.event.source for seen in self.human.events]
        redacted = {
            e.get("redacts") or e.get("content", {}).get("redacts")
            for e in events
            if e.get("type") == "m.room.redaction"
        }
        keys = set()
        for e in events:
            relates = e.get("content", {}).get("m.relates_to", {})
            if (
                e.get("type") == "m.reaction"
                and e.get("sender") == self.bot
                and relates.get("event_id") == event_id
                and e.get("event_id") not in redacted
            ):
                keys.add(str(relates.get("key")))
        return keys

    def question(self, asked: str) -> tuple[Seen, str]:
        """The approval prompt that replies to `asked`: its event, and the question id."""
        for seen, text in self.replies(asked):
            found = APPROVAL_RE.match(text)
            if found:
                return seen, found.group(1)
        raise AssertionError(f"no approval prompt replies to {asked}: {self.texts()}")


async def react(human: Human, room: str, event_id: str, key: str) -> str:
    relates = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
    return await human.send_event(room, "m.reaction", {"m.relates_to": relates})


async def log_in(http: httpx2.AsyncClient, key: str) -> str:
    """Log in to the dashboard with an API key; the session's CSRF token."""
    form = await http.get("/")
    done = await http.post("/login", data={"csrf": csrf_of(form.text), "key": key}, headers=FORM)
    assert done.status_code == 303, done.text
    return csrf_of((await http.get("/")).text)


def squidd(config: Path, *args: str) -> str:
    """Run a `squidd` command as the owner types it; its output (it must succeed)."""
    done = subprocess.run(
        squidd_argv(config, *args),
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"squidd {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def history(data_dir: Path) -> list[dict[str, Any]]:
    """Every message in every session history of a data dir."""
    lines: list[dict[str, Any]] = []
    for path in sorted((data_dir / "sessions").glob("*.jsonl")):
        lines.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return lines


def handled_ids(data_dir: Path) -> list[str]:
    """The handled-message record's ids, one per line (a duplicate shows twice)."""
    path = data_dir / "gateway" / "handled.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]


def outbox(data_dir: Path) -> list[dict[str, Any]]:
    """The replies waiting for delivery."""
    folder = data_dir / "gateway" / "outbox"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def mail_text(message: EmailMessage) -> str:
    """The plain text of a mail, its line ends as in Python (not the wire's CRLF)."""
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content()).replace("\r\n", "\n")


def answer_mail(asked: EmailMessage, to: str, answer: str) -> EmailMessage:
    """A reply to `asked` as a mail client writes it: `answer` above the quoted mail."""
    quoted = "\n".join(f"> {line}" for line in mail_text(asked).splitlines())
    return make_mail(
        to=to,
        subject=f"Re: {str(asked['Subject']).removeprefix('Re: ')}",
        body=f"{answer}\n\nOn Monday the bot wrote:\n{quoted}\n",
        headers={"In-Reply-To": str(asked["Message-ID"]), "References": str(asked["Message-ID"])},
    )


async def ask_until_approval(
    scene: Any, text: str, *, name: str = "alice"
) -> tuple[Human, DaemonProcess, str, Chat, str, Seen, str]:
    """A person (`name`) in a direct chat with `scene`'s bot, started from `matrix_config`,
    asks `text` and waits for the approval question the scripted model makes it ask: the
    person, the daemon, the room, the chat, the asking event, the prompt and its question id."""
    from tests.support.matrix import start_squidd

    human = await scene.make_human(name)
    config = matrix_config(
        scene.tmp_path, scene.fake_llm.base_url, scene.synapse, scene.bot, [human.user_id]
    )
    daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd.log")
    room = await human.room_with(scene.bot.user_id)
    chat = Chat(human, scene.bot.user_id, room)
    asked = await human.send(room, text)
    await human.wait_for(lambda: bool(chat.containing("Approval needed")), "the question", 60)
    prompt, question = chat.question(asked)
    return human, daemon, room, chat, asked, prompt, question
