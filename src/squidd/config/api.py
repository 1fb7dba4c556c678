"""The `[api]` section: the OpenAI-compatible HTTP endpoint (and, later, the dashboard).

Off by default. When on, it always needs a key, loopback too: a keyless local endpoint lets
any local process, or a web page by DNS rebinding, reach a shell-capable agent. The port is
one no other common assistant daemon uses by default, so squidd can run beside them.
"""

from __future__ import annotations

import ipaddress
import secrets
from pathlib import Path

from pydantic import Field, field_validator

from squidd.config._base import Section

DEFAULT_PORT = 18461


def new_key() -> str:
    """A fresh random API key (`squidd init` writes one into the keys file)."""
    return "sqd-" + secrets.token_urlsafe(32)


class ApiSettings(Section):
    """`POST /v1/chat/completions` and `GET /v1/models` on `listen`."""

    enabled: bool = False
    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    """`host:port`; loopback by default (port 0: any free port, for tests). Another address is
    reachable from the network."""
    keys_file: Path | None = None
    """One bearer key per line (`#` comments); must not be group- or world-readable.
    Empty: `<data dir>/api/keys` (written by `squidd init`)."""
    model: str = "squidd"
    """The model name the endpoint answers to and lists (any name is accepted in requests)."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Extra names a client may use in `Host` / `Origin` (a reverse proxy's name); the listen
    address, `localhost` and `127.0.0.1` are always allowed."""
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)
    """A larger request body is refused with 413."""
    requests_per_minute: int = Field(default=60, gt=0)
    """Per key; past it a request gets 429 with Retry-After."""
    max_in_flight: int = Field(default=64, gt=0)
    """Requests waiting for their turn at once, over all keys; past it: 429."""
    idempotency_hours: float = Field(default=24.0, gt=0)
    """How long a reply stays retrievable by its `Idempotency-Key`."""
    keepalive_s: float = Field(default=15.0, gt=0)
    """A streamed response sends an SSE comment this often while the turn runs."""

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError("listen must be host:port, e.g. 127.0.0.1:18461")
        if host != "localhost":
            try:
                ipaddress.ip_address(host)
            except ValueError:
                raise ValueError("listen's host must be an IP address or localhost") from None
        return value

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])

    def keys_path(self, data_dir: Path) -> Path:
        return self.keys_file or data_dir / "api" / "keys"
