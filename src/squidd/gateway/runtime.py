"""Builds the pieces every entry point shares (store, LLM, memory, tools, prompt, agent)
from the settings. `squidd chat` and `squidd run` both start here; the daemon adds its
channels, router and scheduler on top (see `squidd.gateway.daemon`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx2

from squidd.config import Settings
from squidd.core.agent import AgentLoop
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId
from squidd.core.ports import PromptSource, Tool, ToolPolicy
from squidd.core.tools import ToolRegistry
from squidd.llm.openai import OpenAILLM
from squidd.llm.transcription import WhisperTranscriber
from squidd.media.reader import MediaReader
from squidd.secrets import known_secrets
from squidd.store.jsonl import JsonlStore
from squidd.tools.files import file_tools
from squidd.tools.memory_write import MemoryWriteTool
from squidd.tools.policy import ConfiguredToolPolicy
from squidd.tools.search_history import SearchHistoryTool
from squidd.tools.shell import ShellTool
from squidd.tools.web_fetch import WebFetchTool
from squidd.workspace import WorkspacePrompt

DEFAULT_SYSTEM_PROMPT = (
    "You are squidd, a personal assistant. You talk with your owner over chat, email and "
    "the terminal, and you remember what matters across conversations. Be brief and "
    "concrete. Use your tools when they help; say so plainly when you cannot do something."
)


class StaticPrompt:
    """A fixed base prompt (the config's `agents.system_prompt`, or the built-in one)."""

    def __init__(self, text: str) -> None:
        self._text = text

    async def system_prompt(self) -> str:
        return self._text

    def invalidate(self) -> None:
        return None


@dataclass
class Runtime:
    settings: Settings
    store: JsonlStore
    llm: OpenAILLM
    memory: MemoryManager
    registry: ToolRegistry
    prompt: PromptSource
    agent: AgentLoop
    policy: ToolPolicy | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def memory_tools(self, session_id: SessionId) -> list[Tool]:
        """Per-call tools bound to `session_id`, for `AgentLoop.run(extra_tools=...)`."""
        return [
            MemoryWriteTool(
                self.store, session_id, max_chars=self.settings.agents.memory_max_chars
            ),
            SearchHistoryTool(
                self.store, session_id, limit=self.settings.tools.search_history_limit
            ),
        ]

    async def aclose(self) -> None:
        await self.llm.aclose()
        transcriber = self.extra.get("transcriber")
        if isinstance(transcriber, WhisperTranscriber):
            await transcriber.aclose()


def build_prompt(settings: Settings) -> PromptSource:
    # The workspace files (SOUL.md, AGENTS.md, USER.md) make the prompt; the configured or
    # built-in prompt is used while the workspace has none.
    return WorkspacePrompt(
        settings.workspace_dir, fallback=settings.agents.system_prompt or DEFAULT_SYSTEM_PROMPT
    )


def build_registry(settings: Settings) -> ToolRegistry:
    tools = settings.tools
    registry = ToolRegistry(file_tools(settings.workspace_dir, tools.files))
    if tools.web_fetch.enabled:
        registry.register(WebFetchTool(tools.web_fetch))
    if tools.shell.enabled:
        registry.register(
            ShellTool(settings.workspace_dir, tools.shell, known_secrets=known_secrets(settings))
        )
    return registry


def build_policy(settings: Settings) -> ToolPolicy | None:
    return ConfiguredToolPolicy.from_settings(settings.tools)


def build_runtime(settings: Settings, *, http_client: httpx2.AsyncClient | None = None) -> Runtime:
    store = JsonlStore(settings.storage.data_dir, workspace_dir=settings.workspace_dir)
    llm = OpenAILLM(settings.llm, http_client=http_client)
    memory = MemoryManager(
        storage=store,
        llm=llm,
        consolidation_threshold=settings.agents.consolidation_threshold,
        keep_recent_ratio=settings.agents.keep_recent_ratio,
    )
    registry = build_registry(settings)
    prompt = build_prompt(settings)
    transcriber = (
        WhisperTranscriber(settings.transcription) if settings.transcription.base_url else None
    )
    policy = build_policy(settings)
    agent = AgentLoop(
        llm=llm,
        memory=memory,
        registry=registry,
        prompt=prompt,
        max_tool_rounds=settings.agents.max_tool_rounds,
        policy=policy,
        attachments=MediaReader(
            settings.media, vision=settings.llm.vision, transcriber=transcriber
        ),
    )
    return Runtime(
        settings=settings,
        store=store,
        llm=llm,
        memory=memory,
        registry=registry,
        prompt=prompt,
        agent=agent,
        policy=policy,
        extra={"transcriber": transcriber} if transcriber else {},
    )
