"""squidd's configuration: one `Settings` object built from a TOML file and the environment.

Precedence, highest first: `SQUIDD_<SECTION>__<KEY>` environment variables, the TOML file,
the defaults. The file is `--config PATH`, else `$SQUIDD_CONFIG`, else
`~/.config/squidd/config.toml`, else `/etc/squidd/config.toml`; none at all is fine.
Every problem is reported with its key path (`agents.keep_recent_ratio: ...`).

`timezone` at the top level is the owner's: cron (`cron.default_timezone`), the heartbeat's
active hours (`heartbeat.timezone`) and the caps' midnight (`limits.timezone`) use it unless
their section sets its own (a config written before it existed keeps working unchanged).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from squidd.config.accounts import (
    EMAIL,
    MATRIX,
    account_channel,
    account_mail,
    account_matrix,
)
from squidd.config.agents import CAP_KEYS, merged
from squidd.config.api import ApiSettings
from squidd.config.backup import BackupSettings
from squidd.config.checks import check_timezone
from squidd.config.email import EmailSettings
from squidd.config.environment import environment_overrides, overlay
from squidd.config.heartbeat import HeartbeatSettings
from squidd.config.limits import LimitsSettings
from squidd.config.matrix import MatrixSettings
from squidd.config.mcp import McpSettings
from squidd.config.media import MediaSettings, TranscriptionSettings
from squidd.config.memory import MemorySettings
from squidd.config.providers import split_entry
from squidd.config.sections import (
    AgentSettings,
    CronSettings,
    GatewaySettings,
    LLMSettings,
    LoggingSettings,
    PersonSettings,
    StorageSettings,
)
from squidd.config.speech import SpeechSettings
from squidd.config.tools import ToolsSettings
from squidd.errors import ConfigError

__all__ = ["Account", "ConfigError", "Settings", "find_config_file", "load_settings"]


DEFAULT_AGENT = "main"
"""The one agent of a config without `[[agents.list]]`."""

# (section, key) of every timezone that follows the top-level one unless set itself.
TIMEZONE_KEYS = (("cron", "default_timezone"), ("heartbeat", "timezone"), ("limits", "timezone"))


class Settings(BaseModel):
    """Everything squidd can be told. Passed down explicitly; never a global. Built from
    the file's values with the environment's `SQUIDD_*` keys laid over them by
    `load_settings` (config/environment.py); built directly, it is the values given."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # The owner's IANA timezone; a section's own timezone key, when set, wins over it.
    timezone: str = "UTC"
    llm: LLMSettings = Field(default_factory=LLMSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    heartbeat: HeartbeatSettings = Field(default_factory=HeartbeatSettings)
    cron: CronSettings = Field(default_factory=CronSettings)
    matrix: MatrixSettings = Field(default_factory=MatrixSettings)
    email: EmailSettings = Field(default_factory=EmailSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    transcription: TranscriptionSettings = Field(default_factory=TranscriptionSettings)
    speech: SpeechSettings = Field(default_factory=SpeechSettings)
    backup: BackupSettings = Field(default_factory=BackupSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    people: list[PersonSettings] = Field(default_factory=list)
    """The people who share the assistant, each with all their ids (`[[people]]`)."""

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        return check_timezone(value)

    @model_validator(mode="after")
    def _owner_timezone(self) -> Settings:
        """The top-level timezone into each section that does not set its own."""
        for section, key in TIMEZONE_KEYS:
            model = getattr(self, section)
            if key not in model.model_fields_set:
                object.__setattr__(model, key, self.timezone)
        return self

    @model_validator(mode="after")
    def _people_apart(self) -> Settings:
        names = [p.name for p in self.people]
        if len(set(names)) != len(names):
            raise ValueError("people: two entries have the same name")
        ids = [i.lower() for p in self.people for i in p.ids]
        if len(set(ids)) != len(ids):
            raise ValueError("people: an id belongs to two people")
        return self

    @model_validator(mode="after")
    def _agent_chains(self) -> Settings:
        providers = {p.name for p in self.llm.resolved_providers()}
        for entry in self.agents.list:
            for text in entry.chain:
                provider, _ = split_entry(text)
                if provider not in providers:
                    raise ValueError(
                        f"agents.list ({entry.name}): chain entry {text!r} names no provider "
                        f"(known: {', '.join(sorted(providers))})"
                    )
        return self

    @model_validator(mode="after")
    def _embeddings_provider(self) -> Settings:
        entry = self.memory.recall.embeddings
        providers = sorted(p.name for p in self.llm.resolved_providers())
        model = entry.rpartition("/")[2] or "MODEL"
        examples = " or ".join(repr(f"{name}/{model}") for name in providers)
        if entry and "/" not in entry.strip("/"):
            raise ValueError(
                f"memory.recall.embeddings {entry!r} must be PROVIDER/MODEL: {examples}"
            )
        if entry and split_entry(entry)[0] not in providers:
            raise ValueError(
                f"memory.recall.embeddings {entry!r} names no provider "
                f"(known: {', '.join(providers)}; e.g. {examples})"
            )
        return self

    @model_validator(mode="after")
    def _agent_accounts(self) -> Settings:
        seen = {self.matrix.user_id.lower()} if self.matrix.enabled else set()
        for number, entry in enumerate(self.agents.list):
            if entry.matrix is None:
                continue
            where = f"agents.list ({entry.name}).matrix"
            if number == 0:
                raise ValueError(f"{where}: the first agent's account is the [matrix] section")
            if not (entry.matrix.homeserver or self.matrix.homeserver):
                raise ValueError(f"{where}: no homeserver (set it here or in [matrix])")
            if entry.matrix.user_id.lower() in seen:
                raise ValueError(f"{where}: {entry.matrix.user_id} is another account's too")
            seen.add(entry.matrix.user_id.lower())
        return self

    @model_validator(mode="after")
    def _agent_mailboxes(self) -> Settings:
        seen = {self.email.address.lower()} if self.email.enabled else set()
        for number, entry in enumerate(self.agents.list):
            if entry.email is None:
                continue
            where = f"agents.list ({entry.name}).email"
            if number == 0:
                raise ValueError(f"{where}: the first agent's mailbox is the [email] section")
            for host in ("imap_host", "smtp_host"):
                if not (getattr(entry.email, host) or getattr(self.email, host)):
                    raise ValueError(f"{where}: no {host} (set it here or in [email])")
            if entry.email.address in seen:
                raise ValueError(f"{where}: {entry.email.address} is another mailbox's too")
            seen.add(entry.email.address)
        return self

    def matrix_accounts(self) -> list[Account]:
        """The bot accounts to run: `[matrix]` when enabled (the default agent's), then each
        agent's own (config/accounts.py), in the order of `[[agents.list]]`."""
        accounts = [Account(MATRIX, self.default_agent, self)] if self.matrix.enabled else []
        for entry in self.agents.list:
            if entry.matrix is not None:
                matrix = account_matrix(self.matrix, entry.name, entry.matrix)
                accounts.append(self._account(entry.name, MATRIX, matrix=matrix))
        return accounts

    def mail_accounts(self) -> list[Account]:
        """The mailboxes to run: `[email]` when enabled (the default agent's), then each
        agent's own (config/accounts.py), in the order of `[[agents.list]]`."""
        accounts = [Account(EMAIL, self.default_agent, self)] if self.email.enabled else []
        for entry in self.agents.list:
            if entry.email is not None:
                email = account_mail(self.email, entry.name, entry.email)
                accounts.append(self._account(entry.name, EMAIL, email=email))
        return accounts

    def channel_names(self) -> list[str]:
        """The channels `squidd run` starts: each bot account and mailbox (an agent's own
        too, even with `[matrix]` or `[email]` off), then the API."""
        accounts = [*self.matrix_accounts(), *self.mail_accounts()]
        return [a.channel for a in accounts] + (["api"] if self.api.enabled else [])

    def _account(self, agent: str, kind: str, **section: object) -> Account:
        storage = self.storage.model_copy(update={"data_dir": self.agent_store_dir(agent)})
        own = self.model_copy(update={**section, "storage": storage})
        return Account(account_channel(agent, kind), agent, own)

    # --- agents (config/agents.py) ---------------------------------------------------------

    @property
    def agent_names(self) -> list[str]:
        """The agents, the default first; a config without `[[agents.list]]` has one."""
        return [entry.name for entry in self.agents.list] or [DEFAULT_AGENT]

    @property
    def default_agent(self) -> str:
        return self.agent_names[0]

    def agent_store_dir(self, name: str) -> Path:
        """Where an agent's sessions, summaries and history index live: the data dir's own
        for the default agent (as before agents), `agents/<name>/` for the others."""
        if name == self.default_agent:
            return self.storage.data_dir
        return self.storage.data_dir / "agents" / name

    def for_agent(self, name: str) -> Settings:
        """These settings as agent `name` sees them: its `[agents]` keys and workspace, its
        chain; everything else (channels, storage, tools) the daemon's."""
        entry = next((e for e in self.agents.list if e.name == name), None)
        if entry is None:
            if name == self.default_agent:
                return self
            raise KeyError(f"no agent named {name!r}")
        workspace = entry.workspace
        if workspace is None:
            default = name == self.default_agent
            workspace = self.agents.workspace if default else None
            if workspace is None and not default:
                workspace = self.agent_store_dir(name) / "workspace"
        agents = self.agents.model_copy(update={**entry.overrides(), "workspace": workspace})
        tools = self.tools.model_copy(
            update={
                "policy": merged(self.tools.policy, entry.tools),
                "approval": merged(self.tools.approval, entry.approvals),
            }
        )
        return self.model_copy(
            update={
                "agents": agents,
                "llm": self._chain_of(entry.chain),
                "tools": tools,
                "limits": merged(self.limits, entry.limits),
                "heartbeat": merged(self.heartbeat, entry.heartbeat),
            }
        )

    def agent_caps(self, name: str) -> LimitsSettings | None:
        """Agent `name`'s own caps (`[[agents.list]]`'s `limits`), counted over its own
        usage only: the cap keys it sets, the other `[limits]` keys (timezone, notice,
        refusal text) merged over the daemon's; None when it sets no cap."""
        entry = next((e for e in self.agents.list if e.name == name), None)
        own = None if entry is None else entry.limits
        if own is None or not own.model_fields_set & set(CAP_KEYS):
            return None
        caps = merged(self.limits, own)
        unset = {key: None for key in CAP_KEYS if key not in own.model_fields_set}
        return caps.model_copy(update=unset)

    def _chain_of(self, chain: list[str]) -> LLMSettings:
        if not chain:
            return self.llm
        if self.llm.providers:
            return self.llm.model_copy(update={"chain": list(chain)})
        models = [split_entry(text)[1] for text in chain]  # "default/<model>"
        return self.llm.model_copy(update={"model": models[0], "fallback_models": models[1:]})

    @property
    def workspace_dir(self) -> Path:
        return self.agents.workspace or self.storage.data_dir / "workspace"

    @property
    def backup_dir(self) -> Path:
        return self.backup.dir or self.storage.data_dir / "backups"


@dataclass(frozen=True, slots=True)
class Account:
    """One bot account (Matrix) or mailbox the daemon runs: its channel's name, the agent
    it answers for, and the settings its channel (and `squidd matrix`) see: its `[matrix]`
    or `[email]`, and for an agent's own the agent's store dir as the data dir (its files in
    `matrix/` or `email/` there)."""

    channel: str
    agent: str
    settings: Settings

    @property
    def who(self) -> str:
        """The account's own id: its Matrix user id, or its mail address."""
        if self.channel.startswith(MATRIX):
            return self.settings.matrix.user_id
        return self.settings.email.address


def find_config_file(explicit: Path | None = None) -> Path | None:
    """The config file to read, by the documented search order; None when there is none."""
    if explicit is not None:
        return explicit
    from_env = os.environ.get("SQUIDD_CONFIG")
    if from_env:
        return Path(from_env)
    for candidate in (
        Path.home() / ".config" / "squidd" / "config.toml",
        Path("/etc/squidd/config.toml"),
    ):
        if candidate.is_file():
            return candidate
    return None


def _format_error(err: Any) -> str:
    loc = ".".join(str(part) for part in err.get("loc", ()) if part != "__root__")
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        msg = "unknown key (check the spelling against config.example.toml)"
    return f"{loc}: {msg}" if loc else msg


def _top_level_in_any_case(data: dict[str, Any]) -> dict[str, Any]:
    """The file's top-level keys lowercased: they were always matched in any case (`[LLM]`
    loads), as the environment's names are; keys inside a section are exact. Two spellings
    of one key are a problem named, not a silent pick."""
    keys: dict[str, str] = {}
    problems: list[str] = []
    for key in data:
        first = keys.setdefault(key.lower(), key)
        if first != key:
            problems.append(f"{key}: the same key as {first} (case does not matter here)")
    if problems:
        raise ConfigError(problems)
    return {key.lower(): value for key, value in data.items()}


def load_settings(path: Path | None = None) -> Settings:
    """Read and validate the configuration; raise `ConfigError` listing every problem."""
    config_file = find_config_file(path)
    data: dict[str, Any] = {}
    if config_file is not None:
        try:
            raw = config_file.read_bytes()
        except OSError as exc:
            raise ConfigError([f"{config_file}: cannot read: {exc.strerror}"]) from None
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ConfigError([f"{config_file}: not UTF-8 text"]) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([f"{config_file}: TOML syntax: {exc}"]) from None
    data = overlay(_top_level_in_any_case(data), environment_overrides(Settings))
    try:
        return Settings(**data)
    except ValidationError as exc:
        # Inputs are deliberately left out of the messages: they may be secrets.
        problems = [_format_error(err) for err in exc.errors(include_input=False)]
        raise ConfigError(problems) from None
