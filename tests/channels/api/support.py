"""A `squidd run` child with `[api]` on a free loopback port, a keys file, and the scripted
model; the official `openai` client pointed at it."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx2
import openai

from squidd.config.api import new_key
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess

LLM_KEY = "sk-api-channel-test-key-93"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_keys(path: Path, *keys: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# squidd API keys\n" + "".join(f"{k}\n" for k in keys))
    path.chmod(0o600)
    return path


class ApiDaemon:
    """`start()` one `squidd run` after another on the same config, data dir and port."""

    def __init__(
        self,
        tmp: Path,
        llm_url: str,
        *,
        channel: str | None = None,
        sections: dict[str, dict[str, Any]] | None = None,
        **api: Any,
    ) -> None:
        self.tmp = tmp
        self.channel = channel  # a test channel beside the API (tests.support.daemon.SPOOL)
        self.key = new_key()
        self.keys_file = write_keys(tmp / "keys", self.key)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        sections = {
            "api": {
                "enabled": True,
                "listen": f"127.0.0.1:{self.port}",
                "keys_file": self.keys_file,
                **api,
            },
            "gateway": {"shutdown_grace_s": 2},
            **(sections or {}),
        }
        self.config = write_daemon_config(tmp, llm_url, api_key=LLM_KEY, **sections)
        self.runs: list[DaemonProcess] = []

    async def start(self) -> DaemonProcess:
        log = self.tmp / f"daemon-{len(self.runs)}.log"
        run = DaemonProcess(self.config, log, channel=self.channel)
        self.runs.append(run)
        await run.wait_event("api_listening")
        return run

    def close(self) -> None:
        for run in self.runs:
            run.kill()

    def client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key=self.key, max_retries=0, **kwargs
        )

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(base_url=self.url, timeout=60)

    def auth(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", **extra}
