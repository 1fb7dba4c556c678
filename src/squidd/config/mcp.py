"""The `[mcp]` section: external tool servers spoken to over the Model Context Protocol.

Each `[[mcp.servers]]` entry is one server, started (stdio) or reached (streamable HTTP) by
the daemon. Secrets a server needs go in `env_files` / `header_files` (a file per value, read
once at load time, kept as `SecretStr` so they never reach a repr or a log line); `env` and
`headers` hold plain values only. Which channels may use a server's tools is decided by the
tool policy (`[[tools.policy.rules]]`) on the namespaced names `<server>__<tool>`.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from squidd.config._base import Section, read_secret_file

# Names become tool-name prefixes: the model APIs accept [A-Za-z0-9_-]{1,64} for a tool name.
_NAME_RE = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_RE = re.compile(r"^[A-Za-z0-9-]+$")
MAX_SERVER_NAME = 24


class McpServerSettings(Section):
    """One MCP server: how to reach it, which of its tools to offer, and its limits."""

    name: str
    transport: Literal["stdio", "http"] = "stdio"
    enabled: bool = True
    # stdio: the command line of the server process
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_files: dict[str, Path] = Field(default_factory=dict)
    cwd: Path | None = None
    # http: the streamable-HTTP endpoint
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    header_files: dict[str, Path] = Field(default_factory=dict)
    # which tools of the server are offered: `enabled_tools` (empty = all), minus `disabled_tools`
    enabled_tools: list[str] = Field(default_factory=list)
    disabled_tools: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    max_result_chars: int = Field(default=40_000, ge=256, le=4_000_000)
    # stdio: the longest message (one line) read from the server; a longer one is refused
    max_message_bytes: int = Field(default=32 * 1024 * 1024, ge=4096, le=1024 * 1024 * 1024)

    # Filled from env_files / header_files at load time; never written in the file itself.
    secret_env: dict[str, SecretStr] = Field(default_factory=dict, exclude=True)
    secret_headers: dict[str, SecretStr] = Field(default_factory=dict, exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.fullmatch(value) or len(value) > MAX_SERVER_NAME:
            raise ValueError(
                f"must be 1-{MAX_SERVER_NAME} letters, digits, '-' or single '_' "
                "(tools are named '<server>__<tool>')"
            )
        return value

    @field_validator("secret_env", "secret_headers", mode="before")
    @classmethod
    def _derived_only(cls, value: object) -> object:
        if value:
            raise ValueError("not a config key: use env_files / header_files")
        return value

    @field_validator("env", "env_files")
    @classmethod
    def _env_names(cls, value: dict[str, object]) -> dict[str, object]:
        for key in value:
            if not _ENV_RE.fullmatch(key):
                raise ValueError(f"{key!r} is not an environment variable name")
        return value

    @field_validator("headers", "header_files")
    @classmethod
    def _header_names(cls, value: dict[str, object]) -> dict[str, object]:
        for key in value:
            if not _HEADER_RE.fullmatch(key):
                raise ValueError(f"{key!r} is not an HTTP header name")
        return value

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerSettings:
        if self.transport == "stdio":
            if not self.command.strip():
                raise ValueError("a stdio server needs 'command'")
            if self.url or self.headers or self.header_files:
                raise ValueError("'url' and headers are for transport = \"http\"")
        else:
            if not re.match(r"^https?://[^/\s]+", self.url):
                raise ValueError("an http server needs 'url' (http:// or https://)")
            if self.command or self.args or self.env or self.env_files:
                raise ValueError("'command', 'args' and env are for transport = \"stdio\"")
        for key in self.env_files:
            if key in self.env:
                raise ValueError(f"{key} is set in both env and env_files")
        for key in self.header_files:
            if key in self.headers:
                raise ValueError(f"{key} is set in both headers and header_files")
        object.__setattr__(
            self, "secret_env", {k: read_secret_file(p) for k, p in self.env_files.items()}
        )
        object.__setattr__(
            self,
            "secret_headers",
            {k: read_secret_file(p) for k, p in self.header_files.items()},
        )
        return self

    def process_env(self) -> dict[str, str]:
        """The environment added to the server process: plain values, then the secrets."""
        return {**self.env, **{k: v.get_secret_value() for k, v in self.secret_env.items()}}

    def request_headers(self) -> dict[str, str]:
        return {
            **self.headers,
            **{k: v.get_secret_value() for k, v in self.secret_headers.items()},
        }

    def offers(self, tool: str) -> bool:
        """Whether the server's tool `tool` is offered at all (before the channel policy)."""
        if self.enabled_tools and not any(fnmatchcase(tool, p) for p in self.enabled_tools):
            return False
        return not any(fnmatchcase(tool, p) for p in self.disabled_tools)


class McpSettings(Section):
    """`[mcp]`: connection behaviour shared by every server, and the `[[mcp.servers]]` list."""

    connect_timeout_s: float = Field(default=20.0, gt=0, le=600)
    ping_interval_s: float = Field(default=30.0, gt=0, le=3600)
    servers: list[McpServerSettings] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> McpSettings:
        seen: set[str] = set()
        for server in self.servers:
            if server.name in seen:
                raise ValueError(f"two servers are named {server.name!r}")
            seen.add(server.name)
        return self

    def enabled_servers(self) -> list[McpServerSettings]:
        return [server for server in self.servers if server.enabled]
