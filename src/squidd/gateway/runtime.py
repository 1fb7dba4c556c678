"""Builds the pieces every entry point shares (store, LLM, memory, tools, prompt, agent, the
media store and the saved tool results) from the settings, each once. `squidd chat` and
`squidd run` both start here; the composition root (`squidd.gateway.build`) adds the
daemon's channels, router and scheduler on top."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import anyio.to_thread
import httpx2

from squidd.config import DEFAULT_AGENT, Settings
from squidd.core.agent import AgentLoop
from squidd.core.approvals import ApprovalRules, Approvals
from squidd.core.audit import Auditor
from squidd.core.budget import PromptBudget
from squidd.core.journal import Effect
from squidd.core.memory import MemoryManager
from squidd.core.models import HistoryHit
from squidd.core.ports import PromptSource, ToolPolicy
from squidd.core.resume import TurnRecording
from squidd.core.tools import ToolRegistry
from squidd.core.turn_services import TurnLimits, TurnServices
from squidd.core.usage import AgentUsage
from squidd.gateway.people import People, memory_scope
from squidd.gateway.recall import Recall
from squidd.gateway.turn_reads import TurnFiles
from squidd.gateway.unattended import UNATTENDED_CHANNELS, UnattendedAsker
from squidd.llm.breaker import ProviderState, build_providers, close_providers
from squidd.llm.chain import ProviderChain
from squidd.llm.embeddings import embeddings_client
from squidd.llm.speech import SpeechClient
from squidd.llm.transcription import WhisperTranscriber
from squidd.log import SecretRedactor
from squidd.media.reader import MediaReader
from squidd.secrets import known_secrets
from squidd.store.approvals import QuestionFiles
from squidd.store.audit import AuditFile
from squidd.store.journal import JournalDir
from squidd.store.jsonl import JsonlStore
from squidd.store.media import MediaStore
from squidd.store.tool_results import ToolResultFiles
from squidd.store.usage import UsageLedger
from squidd.tools.files import file_tools
from squidd.tools.policy import ConfiguredToolPolicy
from squidd.tools.search_history import SearchAllHistoryTool
from squidd.tools.shell import ShellTool
from squidd.tools.skills import ReadSkillTool, SkillCatalog
from squidd.tools.spawn import SubAgentPolicy
from squidd.tools.web_fetch import WebFetchTool
from squidd.tools.web_search import build_web_search
from squidd.workspace import WorkspacePrompt

DEFAULT_SYSTEM_PROMPT = (
    "You are squidd, a personal assistant. You talk with your owner over chat, email and "
    "the terminal, and you remember what matters across conversations. Be brief and "
    "concrete. Use your tools when they help; say so plainly when you cannot do something."
)


@dataclass
class Runtime:
    settings: Settings
    store: JsonlStore
    llm: ProviderChain
    memory: MemoryManager
    registry: ToolRegistry
    prompt: PromptSource
    agent: AgentLoop
    usage: UsageLedger
    media: MediaStore
    results: ToolResultFiles
    policy: ToolPolicy | None = None
    journal: JournalDir | None = None
    approvals: Approvals | None = None
    unattended: UnattendedAsker | None = None
    name: str = DEFAULT_AGENT
    """The agent this runtime is (config/agents.py)."""
    shared: Shared | None = None
    """What it shares with the daemon's other agents; closed by the default agent's."""
    others: dict[str, Runtime] = field(default_factory=dict)
    """The default agent's: the daemon's other agents, built with it over `shared`."""
    recall: Recall | None = None
    """Hybrid recall over this agent's memory (gateway/recall.py)."""

    @property
    def agents(self) -> dict[str, Runtime]:
        """Every agent's runtime by name, this one first."""
        return {self.name: self, **self.others}

    @property
    def recalls(self) -> dict[str, Recall | None]:
        """Every agent's recall by name."""
        return {name: runtime.recall for name, runtime in self.agents.items()}

    async def learn_windows(self) -> None:
        """Ask local model servers what context they serve; the prompt budget follows the
        smallest window of the chain (llm/chain.py). The other agents' chains too."""
        await self.llm.learn_windows()
        self.memory.use_window(self.llm.context_window)
        for other in self.others.values():
            await other.learn_windows()

    async def aclose(self, *, shared: bool = True) -> None:
        """Close the chain's clients and the tools'; with `shared`, what the agents share."""
        await self.llm.aclose()
        for tool in self.registry.tools():
            closer = getattr(tool, "aclose", None)
            if closer is not None:
                await closer()
        for other in self.others.values():
            await other.aclose(shared=False)
        if self.recall is not None:
            await self.recall.aclose()
        if shared and self.shared is not None:
            await close_providers(self.shared.providers)
            if self.shared.transcriber is not None:
                await self.shared.transcriber.aclose()
            if self.shared.speech is not None:
                await self.shared.speech.aclose()


def build_recall(
    settings: Settings, store: JsonlStore, http_client: httpx2.AsyncClient | None = None
) -> Recall:
    """An agent's recall over its store, with its embeddings model when one is set."""
    embedder = embeddings_client(settings, http_client)
    return Recall(store, settings.memory.recall, scope=memory_scope(settings), embedder=embedder)


def skills_index_part(catalog: SkillCatalog) -> Callable[[], Awaitable[Sequence[str]]]:
    """The skills index as a system prompt part of its own, capped by
    `agents.extra_prompt_tokens` (stable bytes while no skill file changes)."""

    async def parts() -> Sequence[str]:
        text = await anyio.to_thread.run_sync(catalog.index_text)
        return [text] if text else []

    return parts


def build_skills(settings: Settings) -> SkillCatalog | None:
    skills = settings.tools.skills
    if not skills.enabled:
        return None
    roots = [settings.workspace_dir / "skills", *(d.expanduser() for d in skills.extra_dirs)]
    return SkillCatalog(
        roots, max_index_chars=skills.max_index_chars, max_body_chars=skills.max_body_chars
    )


def build_prompt(settings: Settings) -> WorkspacePrompt:
    # The workspace files (SOUL.md, AGENTS.md, USER.md) make the prompt; the configured or
    # built-in prompt is used while the workspace has none.
    return WorkspacePrompt(
        settings.workspace_dir, fallback=settings.agents.system_prompt or DEFAULT_SYSTEM_PROMPT
    )


def build_budget(settings: Settings, context_window: int | None = None) -> PromptBudget:
    """The prompt budget; `context_window` is the chain's (the smallest window of its
    pairs), else the one configured."""
    agents = settings.agents
    return PromptBudget(
        context_window=context_window or settings.llm.context_window,
        context_budget=agents.context_budget,
        memory_tokens=agents.memory_tokens,
        summary_tokens=agents.summary_tokens,
        extra_tokens=agents.extra_prompt_tokens,
    )


def build_registry(
    settings: Settings,
    store: JsonlStore,
    skills: SkillCatalog | None = None,
    *,
    results: ToolResultFiles,
    media: MediaStore,
) -> ToolRegistry:
    tools = settings.tools
    registry = ToolRegistry(
        file_tools(
            settings.workspace_dir,
            tools.files,
            results_dir=results.directory,
            media_dir=media.root,
        )
    )
    if skills is not None:
        registry.register(ReadSkillTool(skills))
    if tools.search_history_across_sessions and memory_scope(settings) == "shared":
        # With memory per person it is a per-call tool, over the speaker's conversations
        # only (gateway/turn_tools.py).
        search = store.search_all_sessions

        async def search_all(query: str, limit: int) -> list[HistoryHit]:
            return await search(query, limit=limit)

        registry.register(SearchAllHistoryTool(search_all, limit=tools.search_history_limit))
    if tools.web_fetch.enabled:
        registry.register(WebFetchTool(tools.web_fetch))
    if tools.web_search.enabled:
        registry.register(build_web_search(tools.web_search))
    if tools.shell.enabled:
        registry.register(
            ShellTool(settings.workspace_dir, tools.shell, known_secrets=known_secrets(settings))
        )
    return registry


def build_policy(settings: Settings) -> ToolPolicy | None:
    return ConfiguredToolPolicy.from_settings(settings.tools)


@dataclass(frozen=True, slots=True)
class Shared:
    """What every agent of the daemon shares: the usage ledger, the media store and saved
    tool results, the turn journal, the audit log, the approval gate, the transcriber, the
    speech endpoint and its health."""

    usage: UsageLedger
    media: MediaStore
    results: ToolResultFiles
    journal: JournalDir
    recording: TurnRecording
    auditor: Auditor
    approvals: Approvals
    unattended: UnattendedAsker
    transcriber: WhisperTranscriber | None
    policy: ToolPolicy
    """The daemon's tool policy; with `[[agents.list]]` each agent builds its own over it
    (`_agent_gate`), as it does its approval gate over `approvals`."""
    providers: dict[str, ProviderState]
    """The model providers every agent's chain asks (one breaker and key set each)."""
    speech: SpeechClient | None = None
    """The speech endpoint's client (`[speech]`), None when nothing is spoken."""


def build_shared(settings: Settings, http_client: httpx2.AsyncClient | None = None) -> Shared:
    data_dir = settings.storage.data_dir
    journal = JournalDir(data_dir)
    approvals, unattended = _approvals(settings)
    transcription = settings.transcription
    return Shared(
        usage=UsageLedger(data_dir, timezone=settings.limits.timezone),
        media=MediaStore(data_dir, lifetime_s=settings.media.lifetime_hours * 3600),
        results=ToolResultFiles(data_dir),
        journal=journal,
        recording=TurnRecording(
            journal,
            effects={name: Effect(value) for name, value in settings.tools.effects.items()},
            max_age=timedelta(hours=settings.gateway.journal_max_age_hours),
        ),
        auditor=Auditor(AuditFile(data_dir), SecretRedactor(known_secrets(settings)).scrub),
        approvals=approvals,
        unattended=unattended,
        transcriber=WhisperTranscriber(transcription) if transcription.base_url else None,
        # Sub-agents' turns (channel "subagent:<root channel>") get the narrowed policy.
        policy=SubAgentPolicy(build_policy(settings), tuple(settings.tools.spawn.denied_tools)),
        providers=build_providers(settings.llm, http_client),
        speech=(
            SpeechClient(settings.speech, max_bytes=settings.media.max_send_bytes)
            if settings.speech.enabled
            else None
        ),
    )


def build_runtime(
    settings: Settings,
    *,
    http_client: httpx2.AsyncClient | None = None,
    agent: str | None = None,
    shared: Shared | None = None,
) -> Runtime:
    """The runtime of agent `agent` (default: the default agent) over `shared` (default:
    made here from the settings): its store, chain, memory, tools, prompt and loop."""
    name = agent or settings.default_agent
    mine = settings.for_agent(name)
    others: dict[str, Runtime] = {}
    if shared is None:
        shared = build_shared(settings, http_client)
        if agent is None:  # the daemon's default agent: the others come with it
            others = {
                other: build_runtime(settings, http_client=http_client, agent=other, shared=shared)
                for other in settings.agent_names[1:]
            }
    store = JsonlStore(settings.agent_store_dir(name), workspace_dir=mine.workspace_dir)
    usage = shared.usage
    llm = ProviderChain(mine.llm, on_failover=usage.failed_over, providers=shared.providers)
    sink = usage if not settings.agents.list else AgentUsage(usage, name)
    memory = MemoryManager(
        storage=store,
        llm=llm,
        usage=sink,
        budget=build_budget(mine, llm.context_window),
        consolidation_threshold=mine.agents.consolidation_threshold,
        keep_recent_ratio=mine.agents.keep_recent_ratio,
    )
    recall = build_recall(mine, store, http_client)
    skills = build_skills(mine)
    registry = build_registry(mine, store, skills, results=shared.results, media=shared.media)
    prompt = build_prompt(mine)
    approvals, unattended, policy = _agent_gate(settings, name, mine, shared)
    services = TurnServices(
        memory=memory,
        registry=registry,
        prompt=prompt,
        limits=TurnLimits(
            max_tool_rounds=mine.agents.max_tool_rounds,
            max_repeated_tool_calls=mine.agents.max_repeated_tool_calls,
            max_turn_seconds=mine.agents.max_turn_seconds,
        ),
        on_demand=mine.tools.on_demand,
        policy=policy,
        usage=sink,
        results=shared.results,
        max_result_chars=mine.tools.max_result_chars,
        attachments=MediaReader(mine.media, vision=llm.vision, transcriber=shared.transcriber),
        prompt_parts=None if skills is None else skills_index_part(skills),
        reader=TurnFiles(store, prompt, skills),
        recording=shared.recording,
        auditor=shared.auditor.for_agent(name) if settings.agents.list else shared.auditor,
        approvals=approvals,
        recall_note=recall.note,
    )
    return Runtime(
        settings=mine,
        store=store,
        llm=llm,
        memory=memory,
        registry=registry,
        prompt=prompt,
        agent=AgentLoop(llm=llm, services=services),
        usage=usage,
        media=shared.media,
        results=shared.results,
        policy=policy,
        journal=shared.journal,
        approvals=approvals,
        unattended=unattended,
        name=name,
        shared=shared,
        others=others,
        recall=recall,
    )


def _approvals(settings: Settings) -> tuple[Approvals, UnattendedAsker]:
    """The approval gate; cron and heartbeat runs have no one to ask: their questions are
    answered by the returned asker (allowed per job by the settings, else denied)."""
    unattended = UnattendedAsker(settings.tools.approval.unattended)
    approvals = Approvals(
        approval_rules(settings),
        QuestionFiles(settings.storage.data_dir),
        dict.fromkeys(UNATTENDED_CHANNELS, unattended),
    )
    return approvals, unattended


def approval_rules(settings: Settings) -> ApprovalRules:
    """`[tools.approval]` (as an agent sees it, for an agent's settings) as the gate's rules."""
    approval = settings.tools.approval
    people = People(settings)
    return ApprovalRules(
        tools=tuple(approval.tools),
        approvers=frozenset(approval.approvers),
        timeout_s=approval.timeout_s,
        approvers_for={
            p.name: frozenset(people.person(a) for a in p.approvers)
            for p in settings.people
            if p.approvers
        },
        person_of=people.person,
    )


def _agent_gate(
    settings: Settings, name: str, mine: Settings, shared: Shared
) -> tuple[Approvals, UnattendedAsker, ToolPolicy]:
    """Agent `name`'s approval gate, unattended asker and tool policy: its own when it has
    `[[agents.list]]` entries (each over the daemon's sections), else the daemon's."""
    if not settings.agents.list:
        return shared.approvals, shared.unattended, shared.policy
    unattended = shared.unattended
    if mine.tools.approval.unattended != settings.tools.approval.unattended:
        unattended = UnattendedAsker(mine.tools.approval.unattended)
    askers = dict.fromkeys(UNATTENDED_CHANNELS, unattended)
    approvals = shared.approvals.for_agent(name, approval_rules(mine), askers)
    policy = SubAgentPolicy(build_policy(mine), tuple(mine.tools.spawn.denied_tools))
    return approvals, unattended, policy
