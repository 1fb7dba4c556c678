"""The LLM checks of a config with `[[llm.providers]]`: one line per provider (reachable,
listing the chain's models), one per refused key ("key 2 of provider main refused", the fix
naming its file, never the key), and per chain pair the one-token answer (unless
`--no-llm-call`) and its window: configured, served (a local server's own figure and where
it came from) and the one the prompt budget uses.

A config without providers keeps its two lines of `services.llm_checks`.
"""

from __future__ import annotations

import httpx2

from squidd.config import Settings
from squidd.config.providers import LOCAL_KINDS, ChainEntry, ProviderSettings
from squidd.errors import LLMError
from squidd.llm.http import async_client
from squidd.llm.local import openai_base, served_window
from squidd.llm.probe import one_token_at
from squidd.llm.survey import ProviderTrial, try_provider
from squidd.ops.doctor import Check, attempt

__all__ = ["provider_checks", "served_windows"]

_START = {
    "ollama": "start it (`ollama serve`)",
    "llamacpp": "start it (`llama-server -m MODEL`)",
    "vllm": "start it (`vllm serve MODEL`)",
}


def _key_file(provider: ProviderSettings, number: int) -> str:
    files = provider.api_key_files
    if number <= len(files):
        return f"replace the key in {files[number - 1]} (api_key_files[{number - 1}])"
    credential = f"llm_{provider.name}_api_key"
    return f"replace key {number} of provider {provider.name} (the credential {credential})"


def _provider_line(provider: ProviderSettings, trial: ProviderTrial, chain: list[str]) -> Check:
    name = f"LLM provider {provider.name}"
    where = provider.base_url
    if not trial.ok:
        if trial.refused and len(trial.refused) == len(trial.keys):
            fix = "replace its keys (see the key lines)"
        else:
            up = _START.get(provider.kind, "check that the endpoint is up")
            fix = f"check base_url of provider {provider.name}; {up} and reachable from here"
        return Check.fail(name, f"{where}: {trial.reason}", fix)
    missing = [model for model in chain if not trial.serves(model)]
    if missing:
        offered = ", ".join(m.name for m in trial.models[:8]) or "(none listed)"
        get = "pull it (`ollama pull MODEL`)" if provider.kind == "ollama" else "serve it"
        return Check.fail(
            name,
            f"{where} does not list {', '.join(missing)} of the chain",
            f"{get}, or change the chain to a model it lists: {offered}",
        )
    keys = f"; {sum(k.state == 'ok' for k in trial.keys)} of {len(trial.keys)} key(s) taken"
    keys = (
        keys
        if trial.keys
        else ("; no key (a local server needs none)" if provider.kind in LOCAL_KINDS else "")
    )
    if not trial.listed:
        return Check.ok(name, f"{where} answers (it lists no models){keys}")
    return Check.ok(name, f"{where} answers and lists {', '.join(chain) or 'its models'}{keys}")


def _key_lines(provider: ProviderSettings, trial: ProviderTrial) -> list[Check]:
    return [
        Check.fail(
            f"LLM provider {provider.name} key {number}",
            f"key {number} of provider {provider.name} refused",
            _key_file(provider, number),
        )
        for number in trial.refused
    ]


async def served_windows(
    settings: Settings, client: httpx2.AsyncClient
) -> dict[str, tuple[int | None, str]]:
    """Per chain pair of a local server: the window it serves and where that came from."""
    windows: dict[str, tuple[int | None, str]] = {}
    for entry in settings.llm.resolved_chain():
        provider = entry.provider
        if provider.kind not in LOCAL_KINDS:
            continue
        key = provider.keys[0].get_secret_value() if provider.keys else None
        served = await served_window(
            provider.kind, provider.base_url, entry.model, client=client, api_key=key
        )
        windows[entry.label] = (served.tokens, served.source)
    return windows


def _window_line(entry: ChainEntry, served: tuple[int | None, str] | None) -> Check:
    name = f"LLM window {entry.label}"
    configured = entry.context_window
    if served is None:
        return Check.ok(name, f"configured {configured} (the endpoint does not say; used)")
    tokens, source = served
    if tokens is None:
        return Check.ok(
            name, f"the server does not say: the configured {configured} is used ({source})"
        )
    used = min(tokens, configured)
    cut = " (the server cuts it)" if tokens < configured else ""
    return Check.ok(
        name, f"configured {configured}, served {tokens} ({source}); the budget uses {used}{cut}"
    )


async def _answer(settings: Settings, entry: ChainEntry, trial: ProviderTrial) -> Check:
    name = f"LLM answers {entry.label}"
    provider = entry.provider
    key = (
        provider.keys[trial.usable_key - 1].get_secret_value()
        if trial.usable_key is not None
        else None
    )

    async def ask() -> Check:
        await one_token_at(
            openai_base(provider.kind, provider.base_url),
            key,
            entry.model,
            timeout_s=provider.timeout_s or settings.llm.timeout_s,
            connect_timeout_s=provider.connect_timeout_s or settings.llm.connect_timeout_s,
        )
        return Check.ok(name, f"{entry.label} answered a one-token request")

    def fix(exc: Exception) -> str:
        return f"check the model name {entry.model!r} and provider {provider.name}'s server"

    return await attempt(name, ask, fix, (LLMError,))


async def provider_checks(
    settings: Settings, *, call: bool, windows: dict[str, tuple[int | None, str]]
) -> list[Check]:
    """The lines of a config with providers (see the module); `windows` as
    `served_windows` gave them."""
    cfg = settings.llm
    chain = cfg.resolved_chain()
    timeout = httpx2.Timeout(cfg.connect_timeout_s * 2, connect=cfg.connect_timeout_s)
    checks: list[Check] = []
    trials: dict[str, ProviderTrial] = {}
    async with async_client(timeout=timeout) as client:
        for provider in cfg.resolved_providers():
            trial = await try_provider(provider, client=client)
            trials[provider.name] = trial
            models = [e.model for e in chain if e.provider.name == provider.name]
            checks.append(_provider_line(provider, trial, models))
            checks.extend(_key_lines(provider, trial))
    for entry in chain:
        trial = trials[entry.provider.name]
        if not call:
            checks.append(
                Check.skip(f"LLM answers {entry.label}", "no request made (--no-llm-call)")
            )
        elif not trial.ok:
            checks.append(Check.skip(f"LLM answers {entry.label}", "the provider check failed"))
        else:
            checks.append(await _answer(settings, entry, trial))
        checks.append(_window_line(entry, windows.get(entry.label)))
    return checks
