"""One provider tried as an operator would want it tried: is it reachable, which of its keys
does it take, which models does it serve and with which windows (`squidd doctor`,
`squidd models`, the start-up try of `squidd run`, `squidd init --interactive`).

Each key is tried with the model list (`GET {openai base}/models`, no tokens spent); a 401
or 403 marks that key refused. Keys are named by their place ("key 2"), never by value,
and no reason quotes a server's error body (it could echo the key). A local server's models
and windows come from its own API (llm/local.py); a hosted endpoint's from its list, with
no window (it does not say). Nothing here raises for the server's doing.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2

from squidd.config.providers import LOCAL_KINDS, ProviderSettings
from squidd.llm import causes
from squidd.llm.local import ServedModel, openai_base, served_models

__all__ = ["KeyTrial", "ProviderTrial", "try_provider"]

_NO_LIST = (404, 405, 501)


@dataclass(frozen=True, slots=True)
class KeyTrial:
    """One key as tried now: "ok", "refused" or "not tried" (the server did not answer)."""

    number: int
    state: str


@dataclass(frozen=True, slots=True)
class ProviderTrial:
    """What one provider answered now."""

    name: str
    kind: str
    base_url: str
    reason: str | None
    """Why it is not usable (unreachable, every key refused, an error status); None: it is."""
    keys: tuple[KeyTrial, ...]
    """Its keys in their configured order; empty for a provider without keys."""
    models: tuple[ServedModel, ...]
    listed: bool
    """The server gave a list of models (some servers have no `/models`)."""
    usable_key: int | None = None
    """The number of the first key it took (None: no key, or none taken)."""

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def refused(self) -> list[int]:
        return [key.number for key in self.keys if key.state == "refused"]

    def serves(self, model: str) -> bool:
        """`model` is in the list (Ollama's ":latest" may be left out); True without a list."""
        if not self.listed:
            return True
        names = {m.name for m in self.models}
        return model in names or f"{model}:latest" in names


@dataclass(frozen=True, slots=True)
class _Listed:
    status: int  # 0: no HTTP answer
    ids: list[str] | None
    reason: str | None


async def _list(client: httpx2.AsyncClient, url: str, key: str | None) -> _Listed:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = await client.get(url, headers=headers)
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        return _Listed(0, None, causes.describe(exc))
    status = response.status_code
    if status in (401, 403):
        what = "refused the key" if key else "wants an API key"
        return _Listed(status, None, f"it {what} (HTTP {status})")
    if status in _NO_LIST:
        return _Listed(status, None, None)
    if status != 200:
        return _Listed(status, None, f"it answered GET /models with HTTP {status}")
    try:
        data = response.json()
    except ValueError:
        return _Listed(status, None, "its GET /models answer is not JSON")
    items = data.get("data") if isinstance(data, dict) else None
    ids = [i["id"] for i in items or [] if isinstance(i, dict) and isinstance(i.get("id"), str)]
    return _Listed(status, ids, None)


async def try_provider(provider: ProviderSettings, *, client: httpx2.AsyncClient) -> ProviderTrial:
    """Try `provider` now with each of its keys (see the module). The client sets timeouts."""
    url = openai_base(provider.kind, provider.base_url).rstrip("/") + "/models"
    secrets = [key.get_secret_value() for key in provider.keys]
    keys: list[KeyTrial] = []
    good: _Listed | None = None
    usable: int | None = None
    last = _Listed(0, None, "no answer")
    for number, secret in enumerate(secrets or [None], start=1):
        if last.status == 0 and number > 1:
            keys.append(KeyTrial(number, "not tried"))
            continue
        last = await _list(client, url, secret)
        refused = last.status in (401, 403)
        if secret is not None:
            state = "refused" if refused else "ok" if last.status else "not tried"
            keys.append(KeyTrial(number, state))
        if good is None and last.status and last.reason is None:
            good, usable = last, (number if secret is not None else None)
    if good is None:
        return ProviderTrial(
            provider.name,
            provider.kind,
            provider.base_url,
            _why(last, keys),
            tuple(keys),
            (),
            False,
        )
    key = secrets[usable - 1] if usable is not None else None
    models: list[ServedModel] = []
    if provider.kind in LOCAL_KINDS:
        models = await served_models(provider.kind, provider.base_url, client=client, api_key=key)
    if not models and good.ids is not None:
        models = [ServedModel(i, None, "the endpoint does not say") for i in good.ids]
    listed = bool(models) or good.ids is not None
    return ProviderTrial(
        provider.name,
        provider.kind,
        provider.base_url,
        None,
        tuple(keys),
        tuple(models),
        listed,
        usable,
    )


def _why(last: _Listed, keys: list[KeyTrial]) -> str:
    if keys and all(k.state == "refused" for k in keys):
        return "every key was refused" if len(keys) > 1 else "its key was refused"
    return last.reason or "no answer"
