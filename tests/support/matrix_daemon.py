"""`squidd run` with the Matrix channel against the test Synapse, for the tests that bring a
person and a daemon up together.

* `bot_matrix_section`: the `[matrix]` keys of the bot answering some people.
* `matrix_daemon_config`: the daemon's config for the bot, answering one person, with short
  delays and no debounce (these tests count one answer per message), plus `sections`.
* `matrix_squidd` (fixture): writes that config for a person and starts the child in one step
  (`start`), and starts it again on the same config (`again`), each with its own log.
* `scene` (fixture, `MatrixScene`): what a Matrix scenario uses together — the server, the
  bot, `make_human`, the test's folder, the scripted model, the `squidd run` children and
  `matrix_squidd` over them — as one fixture.
* `dm_on_element`: a direct chat a person on Element opened with the bot, once the bot joined.
* `user_texts`: what the model was asked, the last user message of each request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import SynapseServer, User
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM
from tests.support.matrix import start_squidd

# `make_human` and `make_element` are fixtures that return a coroutine function.
MakePerson = Callable[..., Any]


def bot_matrix_section(
    synapse: SynapseServer, bot: User, allowed: list[str], **extra: Any
) -> dict[str, Any]:
    """The `[matrix]` keys of the bot's account on the test Synapse answering `allowed`,
    and `extra` (what a test is about)."""
    return {
        "enabled": True,
        "homeserver": synapse.url,
        "user_id": bot.user_id,
        "password": bot.password,
        "allowed_users": allowed,
        **extra,
    }


def matrix_daemon_config(
    tmp: Path,
    llm: FakeLLM,
    synapse: SynapseServer,
    bot: User,
    allowed: str,
    /,
    *,
    token: str | None = None,
    **sections: Mapping[str, Any],
) -> Path:
    """The config; `sections` may hold `llm` too (a chain of providers, say)."""
    matrix = bot_matrix_section(
        synapse,
        bot,
        [allowed],
        timeline_limit=2,
        sync_timeout_s=5,
        reconnect_initial_delay_s=0.2,
        reconnect_max_delay_s=1.0,
        debounce_ms=0,  # these tests count one answer per message
        **synapse.bot_rate,
    )
    if token:
        del matrix["password"]
        matrix["access_token"] = token
    return write_daemon_config(
        tmp,
        llm.base_url,
        api_key="sk-test-matrix-daemon-0001",
        gateway={
            "shutdown_grace_s": 10,
            "delivery_retry_initial_s": 0.2,
            "delivery_retry_max_s": 1.0,
        },
        matrix=matrix,
        **sections,
    )


def user_texts(llm: FakeLLM) -> list[str]:
    texts = []
    for request in llm.chat_requests:
        users = [m for m in request.get("messages", []) if m.get("role") == "user"]
        texts.append(str(users[-1]["content"]) if users else "")
    return texts


@dataclass
class MatrixSquidd:
    """The bot's `squidd run` children of one test, on configs in the test's tmp dir."""

    synapse: SynapseServer
    bot: User
    tmp: Path
    llm: FakeLLM
    squidds: list[DaemonProcess]

    async def start(
        self, allowed: str, log: str = "squidd.log", **sections: Mapping[str, Any]
    ) -> tuple[Path, DaemonProcess]:
        """The config answering `allowed` (and `sections`) and a child started on it."""
        config = matrix_daemon_config(
            self.tmp, self.llm, self.synapse, self.bot, allowed, **sections
        )
        return config, await self.again(config, log)

    def spawn(self, config: Path, log: str, env: Mapping[str, str] | None = None) -> DaemonProcess:
        """A child on `config` (in `env`, the children's own by default), not waited for."""
        daemon = DaemonProcess(config, self.tmp / log, env=env)
        self.squidds.append(daemon)
        return daemon

    async def again(self, config: Path, log: str) -> DaemonProcess:
        """Another child on `config`, logging to `log` in the tmp dir."""
        return await start_squidd(self.squidds, config, self.tmp / log)


@pytest.fixture
def matrix_squidd(
    synapse: SynapseServer,
    bot: User,
    tmp_path: Path,
    fake_llm: FakeLLM,
    squidds: list[DaemonProcess],
) -> MatrixSquidd:
    return MatrixSquidd(synapse, bot, tmp_path, fake_llm, squidds)


@dataclass(frozen=True)
class MatrixScene:
    """The fixtures a Matrix scenario uses together, taken as one."""

    synapse: SynapseServer
    bot: User
    make_human: MakePerson
    tmp_path: Path
    fake_llm: FakeLLM
    squidds: list[DaemonProcess]
    matrix_squidd: MatrixSquidd


@pytest.fixture
def scene(
    synapse: SynapseServer,
    bot: User,
    make_human: MakePerson,
    tmp_path: Path,
    fake_llm: FakeLLM,
    squidds: list[DaemonProcess],
    matrix_squidd: MatrixSquidd,
) -> MatrixScene:
    return MatrixScene(synapse, bot, make_human, tmp_path, fake_llm, squidds, matrix_squidd)


async def dm_on_element(person: ElementClient, bot: User) -> str:
    """The direct chat `person` opens with `bot`, once the bot (its daemon) joined it."""
    room = await person.create_dm(bot.user_id)
    await person.wait_joined(room, bot.user_id)
    return str(room)
