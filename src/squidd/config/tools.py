"""The `[tools]` section: which tools exist, their limits, and where each may be used.

File tools are always on and confined to the workspace. The shell is off until
`[tools.shell] enabled = true`. `web_fetch` is on, behind an SSRF guard. Who may use which
tool is decided by `[[tools.policy.rules]]`, matched on the channel and the session id.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from squidd.config._base import Section

# Names squidd itself uses; rules may also name tools added later, so this is not a gate.
CHANNEL_NAMES = ("terminal", "matrix", "email", "cron", "heartbeat")


class FilesSettings(Section):
    """Caps of the workspace file tools."""

    max_read_bytes: int = Field(default=256 * 1024, gt=0, le=64 * 1024 * 1024)
    max_write_bytes: int = Field(default=256 * 1024, gt=0, le=64 * 1024 * 1024)
    max_list_entries: int = Field(default=500, gt=0, le=100_000)


class ShellSettings(Section):
    """The shell tool. Off by default: whoever can use it runs commands as the daemon user.

    With an empty `allow` list any command runs through `/bin/sh -c`, and `deny` is a guard
    against mistakes (a shell can always spell a command another way). With a non-empty
    `allow` list no shell is involved: the command is split into words and its first word
    must equal an entry of `allow`; pipes and redirections are then plain arguments.
    """

    enabled: bool = False
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    max_output_bytes: int = Field(default=16 * 1024, ge=256, le=4 * 1024 * 1024)
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(
        default_factory=lambda: ["sudo", "su", "doas", "pkexec", "shutdown", "reboot", "mkfs"]
    )
    # Extra environment variables handed to commands (besides PATH, HOME, LANG, ...).
    env_passthrough: list[str] = Field(default_factory=list)

    @field_validator("env_passthrough")
    @classmethod
    def _no_daemon_env(cls, value: list[str]) -> list[str]:
        for name in value:
            if name.upper().startswith("SQUIDD_") or name in ("CREDENTIALS_DIRECTORY",):
                raise ValueError(f"{name} carries the daemon's configuration; not passed on")
        return value


class WebFetchSettings(Section):
    """`web_fetch`: public http(s) pages only, with size, time and redirect caps."""

    enabled: bool = True
    timeout_s: float = Field(default=20.0, gt=0, le=300)
    max_bytes: int = Field(default=2 * 1024 * 1024, gt=0, le=64 * 1024 * 1024)
    max_chars: int = Field(default=40_000, gt=0, le=1_000_000)
    max_redirects: int = Field(default=5, ge=0, le=20)
    user_agent: str = "squidd (personal assistant; +https://example.invalid/squidd)"
    # TEST ONLY. Lets web_fetch reach loopback and private addresses, which defeats the
    # SSRF guard. `squidd config check` warns when it is on. Never set it in production.
    allow_private_addresses_test_only: bool = False


class WebSearchSettings(Section):
    """`web_search`: a search backend answering with title/url/snippet results.

    The configured `url` is trusted (a self-hosted SearXNG on a private address is normal);
    the SSRF guard of `web_fetch` is for URLs the model supplies.
    """

    secret_fields: ClassVar[tuple[str, ...]] = ("api_key",)
    credential_prefix: ClassVar[str] = "web_search"

    enabled: bool = False
    backend: Literal["searxng", "brave", "ddgs"] = "searxng"
    url: str = ""
    api_key: SecretStr | None = None
    api_key_file: Path | None = None
    max_results: int = Field(default=5, ge=1, le=20)
    timeout_s: float = Field(default=15.0, gt=0, le=120)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be an http(s) URL, e.g. http://127.0.0.1:8888")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _backend_needs(self) -> WebSearchSettings:
        if not self.enabled:
            return self
        if self.backend == "searxng" and not self.url:
            raise ValueError("backend searxng needs url (your SearXNG instance)")
        if self.backend == "brave" and self.api_key is None:
            raise ValueError("backend brave needs api_key or api_key_file")
        return self


class SpawnSettings(Section):
    """`spawn`: hand a task to a sub-agent in its own session, waiting or in the background."""

    enabled: bool = True
    # Sub-agents may spawn sub-agents themselves only when this is on, and never deeper
    # than max_depth (1: sub-agents of the conversation only).
    allow_nested: bool = False
    max_depth: int = Field(default=2, ge=1, le=5)
    timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    max_tool_rounds: int = Field(default=10, ge=1, le=100)
    max_per_session: int = Field(default=3, ge=1, le=50)
    max_running: int = Field(default=8, ge=1, le=200)
    # Tools a sub-agent never gets, whatever the policy says about its parent's channel.
    denied_tools: list[str] = Field(default_factory=lambda: ["shell", "write_file", "edit_file"])


class SkillsSettings(Section):
    """Skills: `<workspace>/skills/*/SKILL.md` plus `extra_dirs`; names in the prompt."""

    enabled: bool = True
    extra_dirs: list[Path] = Field(default_factory=list)
    max_index_chars: int = Field(default=4000, ge=200, le=100_000)
    max_body_chars: int = Field(default=20_000, ge=500, le=1_000_000)


class PolicyRule(Section):
    """One rule: for turns on `channel` whose session id matches `session` (a glob),
    the tools named in `allow` are allowed and those in `deny` refused (`*` globs work).
    Rules are read in order; the first rule that matches the turn and names the tool decides;
    within one rule `deny` wins."""

    channel: str = "*"
    session: str = "*"
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @field_validator("channel", "session")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty (use '*' for any)")
        return value

    @model_validator(mode="after")
    def _names_something(self) -> PolicyRule:
        if not self.allow and not self.deny:
            raise ValueError("a rule needs 'allow' or 'deny'")
        for name in (*self.allow, *self.deny):
            if not re.fullmatch(r"[A-Za-z0-9_*?\-]+", name):
                raise ValueError(f"{name!r} is not a tool name or glob")
        return self


class PolicySettings(Section):
    """`[tools.policy]`: `default_deny` tools are refused wherever no rule allows them;
    `[[tools.policy.rules]]` tables decide per channel and session, first match wins."""

    default_deny: list[str] = Field(default_factory=lambda: ["shell"])
    rules: list[PolicyRule] = Field(default_factory=list)


class ApprovalSettings(Section):
    """`[tools.approval]`: the tools whose calls wait for a person's yes (core/approvals.py).

    `approvers` may answer (Matrix ids, mail addresses; empty: whoever the channel lets in);
    with no answer within `timeout_s` the call is denied. A cron job's or the heartbeat's run
    has no one to ask: such a call is denied, unless `unattended` allows that tool for it.
    """

    tools: list[str] = Field(default_factory=lambda: ["shell"])
    approvers: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=300.0, gt=0, le=7 * 86_400)
    # Per scheduled session, "cron:<job name>" or "heartbeat", the tools its runs call
    # without a question (no one is there to answer one): `"cron:backup" = ["shell"]`.
    unattended: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("unattended")
    @classmethod
    def _scheduled_sessions(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for session in value:
            name = session.removeprefix("cron:")
            if session != "heartbeat" and (name == session or not name.strip()):
                raise ValueError(f"{session!r}: a key is cron:<job name> or heartbeat")
        return value


class AuditSettings(Section):
    """`[tools.audit]`: the audit log of every tool call (`squidd audit`)."""

    # Where the log's head (line count, last hash) is sent once a day, so that even a
    # rewrite of the whole log is caught: "matrix:!roomid:example.org" or
    # "email:owner@example.org". Empty: not sent.
    anchor_to: str = ""

    @field_validator("anchor_to")
    @classmethod
    def _destination(cls, value: str) -> str:
        value = value.strip()
        kind = value.split(":", 1)[0].partition("-")[0]  # matrix-<agent>: an agent's account
        if value and (":" not in value or kind not in ("matrix", "email")):
            raise ValueError("must be matrix:<room id> or email:<address>")
        return value


class ToolsSettings(Section):
    search_history_limit: int = Field(default=10, gt=0, le=100)
    search_history_across_sessions: bool = False
    # A tool result longer than this enters the history cut, with the whole text saved
    # under <data dir>/tool-results/ and a note saying how to read the rest.
    max_result_chars: int = Field(default=16_000, ge=1_000, le=10_000_000)
    # Saved full results older than this many days are removed by the daemon.
    result_retention_days: int = Field(default=30, ge=1, le=3650)
    # Tools (names or globs) whose schemas are sent only after the model asks for them
    # with `load_tools`: rarely used or large tool sets cost no tokens until needed.
    on_demand: list[str] = Field(default_factory=lambda: ["cron_*"])
    # What running a tool twice does, per tool name, over what the tool declares (MCP tools
    # by their annotations): "read_only", "idempotent" or "side_effect". After a crash, a
    # call that started without a recorded result runs again only if not "side_effect".
    effects: dict[str, Literal["read_only", "idempotent", "side_effect"]] = Field(
        default_factory=dict
    )
    files: FilesSettings = Field(default_factory=FilesSettings)
    shell: ShellSettings = Field(default_factory=ShellSettings)
    web_fetch: WebFetchSettings = Field(default_factory=WebFetchSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)
    spawn: SpawnSettings = Field(default_factory=SpawnSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
