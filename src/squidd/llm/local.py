"""What context a local model server really serves, asked of the server itself.

Local servers cut a prompt longer than the context they serve without an error (Ollama's
default context is small and it truncates silently), so the prompt budget must come from
the smaller of the configured window and what the server says here. Each server is asked
through its own documented API, at its root (not under the OpenAI-compatible `/v1`):

- Ollama (docs/api.md of ollama/ollama): `GET /api/ps` gives a loaded model's
  `context_length`, what it runs with right now (the truth when present); `POST /api/show`
  gives the trained length (`model_info["<arch>.context_length"]`, arch from
  `general.architecture`) and a Modelfile's `num_ctx` line in `parameters`. A model neither
  loaded nor given `num_ctx` gets the server's default (`OLLAMA_CONTEXT_LENGTH`): 4096 is
  assumed, no more than the trained length, and the source says it may differ.
  `GET /api/tags` lists the models.
- llama.cpp's server (tools/server/README.md of ggml-org/llama.cpp): `GET /props` gives
  `default_generation_settings.n_ctx`, already the context of one slot (a top-level `n_ctx`
  of some versions is read too); `GET /health` (503 while the model loads) tells a server
  still loading from one that fails; `GET /v1/models` lists its one model.
- vLLM's OpenAI-compatible server: `GET /v1/models` gives `max_model_len` for each served
  model (`--max-model-len`), matched by `id`.
- kind "openai": the endpoint does not say; its models come from `GET {base_url}/models`.

Nothing here raises for the server's doing: a refused connection, a timeout, an answer
that is not JSON or not of the documented shape all give a window of None with the reason
in words (connection failures in the words of llm/causes.py). An API key goes as a Bearer
header and is never part of a reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import httpx2

from squidd.llm import causes

__all__ = [
    "Kind",
    "ServedModel",
    "ServedWindow",
    "openai_base",
    "served_models",
    "served_window",
    "server_root",
]

Kind = Literal["openai", "ollama", "llamacpp", "vllm"]

OLLAMA_DEFAULT_CONTEXT = 4096
"""Ollama's default context (`OLLAMA_CONTEXT_LENGTH`) in current releases on a small GPU;
2048 in releases before 0.6, more on a GPU with 24 GiB or more."""

_SHOW_CONCURRENCY = 4  # /api/show reads the model file's header: a few at a time

_LABEL = {"ollama": "Ollama", "llamacpp": "llama.cpp server", "vllm": "vLLM"}


@dataclass(frozen=True)
class ServedWindow:
    tokens: int | None
    """The context the server serves for this model; None when it does not say."""
    source: str
    """In words: where `tokens` came from, or why it is unknown."""


@dataclass(frozen=True)
class ServedModel:
    name: str
    window: int | None
    source: str = ""
    """Where `window` came from, or why it is unknown (as `ServedWindow.source`)."""


def server_root(kind: str, base_url: str) -> str:
    """`base_url` without a trailing "/v1": the server's own API lives at its root."""
    return base_url.rstrip("/").removesuffix("/v1")


def openai_base(kind: str, base_url: str) -> str:
    """Where the OpenAI-compatible API is: the root + "/v1" for a local server (whether or
    not the user wrote /v1), `base_url` as given for "openai"."""
    if kind == "openai":
        return base_url
    return server_root(kind, base_url) + "/v1"


class _UnansweredError(Exception):
    """The server gave no usable answer; `reason` says why, in words. `status` is the HTTP
    status it answered (200 for an answer of the wrong shape, 0 for no answer at all)."""

    def __init__(self, reason: str, status: int = 200) -> None:
        super().__init__(reason)
        self.reason, self.status = reason, status


class _UnreachableError(_UnansweredError):
    """No HTTP answer at all: asking again elsewhere on the same server is pointless."""


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _error_text(response: httpx2.Response) -> str:
    """The server's own words from an error body: Ollama's `error`, OpenAI's
    `error.message`, FastAPI's `detail`; "" when there are none."""
    try:
        body = response.json()
    except ValueError:
        body = None
    body = body if isinstance(body, dict) else {}
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("message")
    for text in (error, body.get("message"), body.get("detail")):
        if isinstance(text, str) and text.strip():
            return text.strip()[:200]
    return ""


@dataclass(frozen=True)
class _Server:
    kind: str
    root: str
    client: httpx2.AsyncClient
    api_key: str | None

    @property
    def label(self) -> str:
        return _LABEL.get(self.kind, "the endpoint")

    def redact(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text

    async def ask(self, method: str, path: str, body: dict[str, Any] | None = None) -> object:
        """The decoded JSON of a 200 answer to `method root+path`, else `_UnansweredError`."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = await self.client.request(
                method, self.root + path, headers=headers, json=body
            )
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise _UnreachableError(f"{self.label}: {causes.describe(exc)}", 0) from None
        where = f"{method} {path}"
        if response.status_code != 200:
            said = _error_text(response)
            said = f": {said}" if said else ""
            if response.status_code in (401, 403):
                what = "refused the API key" if self.api_key else "wants an API key"
                raise _UnansweredError(
                    f"{self.label} {what} (HTTP {response.status_code} to {where})", 401
                )
            raise _UnansweredError(
                f"{self.label} answered {where} with HTTP {response.status_code}{said}",
                response.status_code,
            )
        try:
            return response.json()
        except ValueError:
            raise _UnansweredError(
                f"{self.label} answered {where} with something not JSON"
            ) from None


def _entries(data: object, key: str) -> list[dict[str, Any]]:
    """The objects in `data[key]` (a list); foreign items are skipped."""
    items = data.get(key) if isinstance(data, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


# --- Ollama --------------------------------------------------------------------------------


def _ollama_name(name: str) -> str:
    """Ollama's full name: a name without a tag means ":latest"."""
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


async def _ollama_loaded(server: _Server) -> dict[str, int]:
    """Loaded model (full name) -> the context it runs with; {} when /api/ps cannot say."""
    try:
        data = await server.ask("GET", "/api/ps")
    except _UnreachableError:
        raise
    except _UnansweredError:
        return {}  # an old Ollama without /api/ps: /api/show still says something
    loaded: dict[str, int] = {}
    for entry in _entries(data, "models"):
        context = _positive_int(entry.get("context_length"))
        for key in ("name", "model"):
            if isinstance(entry.get(key), str) and context is not None:
                loaded[_ollama_name(entry[key])] = context
    return loaded


def _ollama_show(data: object) -> tuple[int | None, int | None]:
    """(trained length, the Modelfile's num_ctx) from an /api/show answer."""
    info = data.get("model_info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        raise _UnansweredError("Ollama's /api/show answer has no model_info")
    arch = info.get("general.architecture")
    trained = _positive_int(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None
    parameters = data.get("parameters") if isinstance(data, dict) else None
    num_ctx = None
    for line in parameters.splitlines() if isinstance(parameters, str) else []:
        words = line.split()
        if len(words) == 2 and words[0] == "num_ctx" and words[1].isdigit():
            num_ctx = _positive_int(int(words[1]))
    return trained, num_ctx


def _ollama_served(model: str, trained: int | None, num_ctx: int | None) -> ServedWindow:
    """The window of a model not loaded now, as Ollama will load it."""
    if num_ctx is not None:
        # Ollama loads no more than the trained length, whatever num_ctx asks.
        tokens = min(num_ctx, trained) if trained else num_ctx
        capped = f", capped at the trained {trained}" if tokens < num_ctx else ""
        return ServedWindow(
            tokens, f"Ollama /api/show: the Modelfile sets num_ctx {num_ctx}{capped}"
        )
    tokens = min(trained, OLLAMA_DEFAULT_CONTEXT) if trained else OLLAMA_DEFAULT_CONTEXT
    return ServedWindow(
        tokens,
        f"Ollama's default context, assumed {tokens}: {model} is not loaded now and its "
        f"Modelfile sets no num_ctx; the server's default (OLLAMA_CONTEXT_LENGTH: 4096 in "
        f"current releases, more on a large GPU, 2048 in old ones) may differ; set num_ctx "
        f"or OLLAMA_CONTEXT_LENGTH to be sure",
    )


async def _ollama_unloaded(server: _Server, model: str) -> ServedWindow:
    try:
        data = await server.ask("POST", "/api/show", {"model": model})
    except _UnansweredError as exc:
        if exc.status == 404:
            raise _UnansweredError(f"Ollama has no model {model} (ollama pull {model})") from None
        raise
    trained, num_ctx = _ollama_show(data)
    return _ollama_served(model, trained, num_ctx)


async def _ollama_window(server: _Server, model: str) -> ServedWindow:
    context = (await _ollama_loaded(server)).get(_ollama_name(model))
    if context is not None:
        return ServedWindow(context, f"Ollama /api/ps: loaded with {context}")
    return await _ollama_unloaded(server, model)


async def _ollama_models(server: _Server) -> list[ServedModel]:
    tags = _entries(await server.ask("GET", "/api/tags"), "models")
    names = [name for entry in tags if isinstance(name := entry.get("name"), str)]
    loaded = await _ollama_loaded(server)
    windows: dict[str, ServedWindow] = {}
    limiter = anyio.CapacityLimiter(_SHOW_CONCURRENCY)

    async def one(name: str) -> None:
        async with limiter:
            windows[name] = await _guarded(server, _ollama_unloaded(server, name))

    async with anyio.create_task_group() as tg:
        for name in names:
            if (context := loaded.get(_ollama_name(name))) is not None:
                windows[name] = ServedWindow(context, f"Ollama /api/ps: loaded with {context}")
            else:
                tg.start_soon(one, name)
    return [ServedModel(name, windows[name].tokens, windows[name].source) for name in names]


# --- llama.cpp -----------------------------------------------------------------------------


def _llamacpp_n_ctx(data: object) -> int | None:
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    per_slot = _positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return per_slot or _positive_int(data.get("n_ctx"))


async def _llamacpp_window(server: _Server, model: str = "") -> ServedWindow:
    """The one model's window (llama.cpp serves one model whatever name is asked)."""
    try:
        data = await server.ask("GET", "/props")
    except _UnansweredError as exc:
        if exc.status >= 500 and await _llamacpp_loading(server):
            raise _UnansweredError("llama.cpp server is still loading its model") from None
        raise
    tokens = _llamacpp_n_ctx(data)
    if tokens is None:
        raise _UnansweredError("llama.cpp server's /props answer has no n_ctx")
    slots = _positive_int(data.get("total_slots")) if isinstance(data, dict) else None
    of = f" ({slots} slots)" if slots and slots > 1 else ""
    return ServedWindow(tokens, f"llama.cpp /props: n_ctx {tokens} per slot{of}")


async def _llamacpp_loading(server: _Server) -> bool:
    """/health answers 503 while the model loads, 200 once it serves (it needs no key)."""
    try:
        await server.ask("GET", "/health")
    except _UnansweredError as exc:
        return exc.status == 503
    return False


async def _llamacpp_models(server: _Server) -> list[ServedModel]:
    ids = _ids(await server.ask("GET", "/v1/models"))
    window = await _guarded(server, _llamacpp_window(server))
    return [ServedModel(name, window.tokens, window.source) for name in ids]


# --- vLLM and plain OpenAI-compatible endpoints --------------------------------------------


def _ids(data: object) -> list[str]:
    return [e["id"] for e in _entries(data, "data") if isinstance(e.get("id"), str)]


def _vllm_windows(data: object) -> list[ServedModel]:
    served = []
    for entry in _entries(data, "data"):
        if isinstance(name := entry.get("id"), str):
            tokens = _positive_int(entry.get("max_model_len"))
            why = (
                f"vLLM /v1/models: max_model_len {tokens}"
                if tokens
                else "vLLM gives no max_model_len"
            )
            served.append(ServedModel(name, tokens, why))
    return served


async def _vllm_window(server: _Server, model: str) -> ServedWindow:
    served = _vllm_windows(await server.ask("GET", "/v1/models"))
    for entry in served:
        if entry.name == model:
            return ServedWindow(entry.window, entry.source)
    names = ", ".join(entry.name for entry in served[:10]) or "none"
    raise _UnansweredError(f"vLLM serves no model named {model} (it serves: {names})")


async def _vllm_models(server: _Server) -> list[ServedModel]:
    return _vllm_windows(await server.ask("GET", "/v1/models"))


async def _openai_window(server: _Server, model: str) -> ServedWindow:
    return ServedWindow(None, "the endpoint does not say")


async def _openai_models(server: _Server) -> list[ServedModel]:
    ids = _ids(await server.ask("GET", "/models"))
    return [ServedModel(name, None, "the endpoint does not say") for name in ids]


# --- the public surface --------------------------------------------------------------------

_AskWindow = Callable[[_Server, str], Awaitable[ServedWindow]]
_AskModels = Callable[[_Server], Awaitable[list[ServedModel]]]
_ASK: dict[str, tuple[_AskWindow, _AskModels]] = {
    "ollama": (_ollama_window, _ollama_models),
    "llamacpp": (_llamacpp_window, _llamacpp_models),
    "vllm": (_vllm_window, _vllm_models),
    "openai": (_openai_window, _openai_models),
}


def _server(kind: str, base_url: str, client: httpx2.AsyncClient, api_key: str | None) -> _Server:
    if kind not in _ASK:
        raise ValueError(f"unknown kind of model server: {kind!r}")
    # "openai" is asked where the user points (…/v1/models); the others at their root.
    root = base_url.rstrip("/") if kind == "openai" else server_root(kind, base_url)
    return _Server(kind, root, client, api_key)


async def _guarded(server: _Server, asking: Awaitable[ServedWindow]) -> ServedWindow:
    try:
        return await asking
    except _UnansweredError as exc:
        return ServedWindow(None, server.redact(exc.reason))


async def served_window(
    kind: Kind, base_url: str, model: str, *, client: httpx2.AsyncClient, api_key: str | None = None
) -> ServedWindow:
    """The context the server serves for `model`, or None and why not (never raises for the
    server's doing). The caller's client sets the timeouts."""
    server = _server(kind, base_url, client, api_key)
    window = await _guarded(server, _ASK[kind][0](server, model))
    return ServedWindow(window.tokens, server.redact(window.source))


async def served_models(
    kind: Kind, base_url: str, *, client: httpx2.AsyncClient, api_key: str | None = None
) -> list[ServedModel]:
    """The models the server lists, each with its window; [] when it lists none or cannot
    be asked (`served_window` for one model says why)."""
    server = _server(kind, base_url, client, api_key)
    try:
        models = await _ASK[kind][1](server)
    except _UnansweredError:
        return []
    return [ServedModel(m.name, m.window, server.redact(m.source)) for m in models]
