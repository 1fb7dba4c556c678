"""The fixed part of the prompt against the smallest window of the chain.

Every turn sends the system prompt (the workspace files, MEMORY.md, the skills index) and
the tool schemas before any history. On a local server serving 4,096 tokens, a fixed part of
1,500 leaves little for the conversation: the turn is squeezed, or (Ollama) the server cuts
the prompt without an error. Over a quarter of the window is a ✗ that names the fixes (the
server's context setting, fewer tools, `tools.on_demand`); the daemon still runs.

The estimate builds the runtime as `squidd chat` does (nothing is sent, nothing written) and
counts with the daemon's own `TokenEstimator`; the per-turn tools are those of a Matrix
turn that can send files, the widest set.
"""

from __future__ import annotations

from squidd.config import Settings
from squidd.core.estimator import TokenEstimator, tools_chars
from squidd.core.models import SessionId
from squidd.core.reply_files import ReplyFiles
from squidd.core.tool_calls import offer, tools_for
from squidd.gateway.build import build_terminal
from squidd.gateway.runtime import build_skills, skills_index_part
from squidd.gateway.turn_tools import TurnScope
from squidd.ops.doctor import Check

__all__ = ["budget_window", "fixed_prompt_check", "fixed_prompt_tokens"]

NAME = "fixed prompt"

_SERVER_SETTING = {
    "ollama": "Ollama's num_ctx (a Modelfile's PARAMETER num_ctx) or OLLAMA_CONTEXT_LENGTH",
    "llamacpp": "llama.cpp's --ctx-size",
    "vllm": "vLLM's --max-model-len",
}


async def fixed_prompt_tokens(settings: Settings) -> tuple[int, int]:
    """(tokens of the system prompt with MEMORY.md and the skills index, tokens of the tool
    schemas a turn sends)."""
    terminal = build_terminal(settings, ignore_caps=True)
    runtime = terminal.runtime
    try:
        text = await runtime.prompt.system_prompt()
        memory = await runtime.store.load_global_memory()
        skills = build_skills(settings)
        parts = list(await skills_index_part(skills)()) if skills is not None else []
        system = "\n\n".join(part for part in (text, memory.strip(), *parts) if part)
        scope = TurnScope(SessionId("doctor"), "matrix", reply_files=ReplyFiles())
        extra = terminal.tools.for_turn(scope)
        tools = tools_for(runtime.registry, runtime.policy, scope.session, "matrix", extra)
        definitions = offer(tools, settings.tools.on_demand)
    finally:
        await runtime.aclose()
    estimator = TokenEstimator()
    return estimator.tokens(len(system)), estimator.tokens(tools_chars(definitions))


def budget_window(
    settings: Settings, windows: dict[str, tuple[int | None, str]]
) -> tuple[int, str, str]:
    """(the smallest window of the chain as the budget uses it, its pair, its kind)."""
    pairs = []
    for entry in settings.llm.resolved_chain():
        served = windows.get(entry.label, (None, ""))[0]
        used = entry.context_window if served is None else min(served, entry.context_window)
        pairs.append((used, entry.label, entry.provider.kind))
    return min(pairs, key=lambda pair: pair[0])  # a chain has at least one pair


async def fixed_prompt_check(
    settings: Settings, windows: dict[str, tuple[int | None, str]]
) -> Check:
    system, schemas = await fixed_prompt_tokens(settings)
    window, label, kind = budget_window(settings, windows)
    total = system + schemas
    detail = (
        f"about {total:,} tokens (system prompt {system:,}, tool schemas {schemas:,}) of the "
        f"{window:,}-token window of {label}"
    )
    if total * 4 <= window:
        return Check.ok(NAME, detail)
    setting = _SERVER_SETTING.get(kind, "a model with a larger window (its context_window)")
    return Check.fail(
        NAME,
        f"{detail}: over a quarter, little is left for the conversation",
        f"raise the window with {setting}; or send fewer tools (a tools.policy rule "
        f"that denies some, fewer MCP servers) or put more behind load_tools with "
        f"tools.on_demand; or shorten the workspace files and MEMORY.md",
    )
