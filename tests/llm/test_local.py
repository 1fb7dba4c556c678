"""What a local model server really serves, asked of scripted servers that speak each
documented API on loopback: Ollama (loaded, not loaded, num_ctx set), llama.cpp's server
(loading, per-slot n_ctx), vLLM (max_model_len), a plain OpenAI endpoint; a server that is
down, one that answers garbage (any JSON, any bytes: never a crash), and a key that never
shows in a reason."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squidd.config.sections import LLMSettings
from squidd.core.models import Message, TextDelta
from squidd.llm.chain import ProviderChain
from squidd.llm.local import (
    ServedModel,
    ServedWindow,
    openai_base,
    served_models,
    served_window,
    server_root,
)
from tests.support.local_servers import ScriptedLlamaCpp, ScriptedOllama, ScriptedVllm

pytestmark = pytest.mark.anyio

KEY = "sk-local-secret-7f3a"


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(10.0, connect=5.0)) as c:
        yield c


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port held bound but not listening: connections to it are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield int(sock.getsockname()[1])
    sock.close()


def test_the_root_and_the_openai_base_of_each_kind() -> None:
    assert server_root("ollama", "http://127.0.0.1:11434/v1/") == "http://127.0.0.1:11434"
    assert server_root("vllm", "http://h:8000") == "http://h:8000"
    for written in ("http://h:8080", "http://h:8080/", "http://h:8080/v1"):
        assert openai_base("llamacpp", written) == "http://h:8080/v1"
    assert openai_base("openai", "https://api.openai.com/v1") == "https://api.openai.com/v1"
    assert openai_base("openai", "https://router.example/api") == "https://router.example/api"


# --- Ollama --------------------------------------------------------------------------------


async def test_a_loaded_ollama_model_serves_what_ps_says(client: httpx2.AsyncClient) -> None:
    models = {"qwen3:8b": {"trained": 40960, "num_ctx": 8192, "loaded": 4096}}
    with ScriptedOllama(models) as server:
        window = await served_window("ollama", server.root, "qwen3:8b", client=client)
    assert window == ServedWindow(4096, "Ollama /api/ps: loaded with 4096")
    assert server.count("/api/show") == 0  # what is loaded is the truth: no more asked


async def test_an_untagged_name_is_the_latest_tag(client: httpx2.AsyncClient) -> None:
    models = {"llama3.2:latest": {"trained": 131072, "num_ctx": None, "loaded": 16384}}
    with ScriptedOllama(models) as server:
        window = await served_window("ollama", server.root + "/v1", "llama3.2", client=client)
    assert window.tokens == 16384


async def test_an_unloaded_model_gets_its_num_ctx(client: httpx2.AsyncClient) -> None:
    models = {"qwen3:8b": {"trained": 40960, "num_ctx": 16384, "loaded": None}}
    with ScriptedOllama(models) as server:
        window = await served_window("ollama", server.root, "qwen3:8b", client=client)
        shown = [heard.body for heard in server.heard() if heard.path == "/api/show"]
    assert window.tokens == 16384
    assert "num_ctx 16384" in window.source
    assert shown == [{"model": "qwen3:8b"}]


async def test_num_ctx_past_the_trained_length_is_capped(client: httpx2.AsyncClient) -> None:
    models = {"small:1b": {"trained": 8192, "num_ctx": 32768, "loaded": None, "arch": "llama"}}
    with ScriptedOllama(models) as server:
        window = await served_window("ollama", server.root, "small:1b", client=client)
    assert window.tokens == 8192
    assert "capped" in window.source


async def test_without_num_ctx_ollamas_default_is_assumed_and_said(
    client: httpx2.AsyncClient,
) -> None:
    models = {
        "qwen3:8b": {"trained": 40960, "num_ctx": None, "loaded": None},
        "tiny:1b": {"trained": 2048, "num_ctx": None, "loaded": None},
    }
    with ScriptedOllama(models) as server:
        big = await served_window("ollama", server.root, "qwen3:8b", client=client)
        tiny = await served_window("ollama", server.root, "tiny:1b", client=client)
    assert big.tokens == 4096
    assert "default" in big.source and "may differ" in big.source
    assert "OLLAMA_CONTEXT_LENGTH" in big.source and "num_ctx" in big.source
    assert tiny.tokens == 2048  # never more than the model was trained for


async def test_a_model_ollama_does_not_have(client: httpx2.AsyncClient) -> None:
    with ScriptedOllama({"qwen3:8b": {"trained": 40960, "loaded": None}}) as server:
        window = await served_window("ollama", server.root, "mistral:7b", client=client)
    assert window.tokens is None
    assert "no model mistral:7b" in window.source and "ollama pull" in window.source


async def test_ollama_lists_its_models_with_their_windows(client: httpx2.AsyncClient) -> None:
    models = {
        "qwen3:8b": {"trained": 40960, "num_ctx": None, "loaded": 8192},
        "llama3.1:8b": {"trained": 131072, "num_ctx": 32768, "loaded": None, "arch": "llama"},
        "phi3:mini": {"trained": 4096, "num_ctx": None, "loaded": None, "arch": "phi3"},
    }
    with ScriptedOllama(models) as server:
        listed = await served_models("ollama", server.root, client=client)
        assert server.count("/api/tags") == 1 and server.count("/api/ps") == 1
        assert server.count("/api/show") == 2  # the loaded one needs none
    assert [(m.name, m.window) for m in listed] == [
        ("qwen3:8b", 8192),
        ("llama3.1:8b", 32768),
        ("phi3:mini", 4096),
    ]


class _Counting(httpx2.AsyncHTTPTransport):
    """A real transport that counts the requests it has under way."""

    def __init__(self) -> None:
        super().__init__()
        self.under_way = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.under_way += 1
        try:
            response = await super().handle_async_request(request)
            await response.aread()
        finally:
            self.under_way -= 1
        return response


async def test_ollama_is_shown_a_few_models_at_a_time() -> None:
    models = {f"m{i}:1b": {"trained": 8192, "num_ctx": None, "loaded": None} for i in range(7)}
    listed: list[ServedModel] = []
    transport = _Counting()
    with ScriptedOllama(models) as server:
        server.let_show.clear()  # every /api/show waits until the test lets it go
        server.hold_at = 4

        async def list_them(client: httpx2.AsyncClient) -> None:
            listed.extend(await served_models("ollama", server.root, client=client))

        async with (
            httpx2.AsyncClient(transport=transport) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(list_them, client)
            assert await anyio.to_thread.run_sync(server.held.wait, 60)
            await anyio.wait_all_tasks_blocked()  # any fifth request would be under way now
            under_way = transport.under_way
            server.let_show.set()
    assert under_way == 4 and server.most_showing == 4
    assert [m.window for m in listed] == [4096] * 7


# --- llama.cpp -----------------------------------------------------------------------------


async def test_llamacpp_serves_its_per_slot_n_ctx(client: httpx2.AsyncClient) -> None:
    with ScriptedLlamaCpp(n_ctx=4096, model="qwen") as server:
        server.slots = 4
        window = await served_window("llamacpp", server.root + "/v1", "qwen", client=client)
    assert window.tokens == 4096
    assert "per slot" in window.source and "4 slots" in window.source


async def test_llamacpp_n_ctx_at_the_top_of_props(client: httpx2.AsyncClient) -> None:
    with ScriptedLlamaCpp(n_ctx=2048) as server:
        server.top_level_n_ctx = True
        window = await served_window("llamacpp", server.root, "qwen", client=client)
    assert window.tokens == 2048


async def test_llamacpp_still_loading_is_told_from_down(
    client: httpx2.AsyncClient, refused_port: int
) -> None:
    with ScriptedLlamaCpp() as server:
        server.loading = True
        loading = await served_window("llamacpp", server.root, "qwen", client=client)
        assert server.count("/health") == 1
    down = await served_window("llamacpp", f"http://127.0.0.1:{refused_port}", "q", client=client)
    assert loading.tokens is None and "still loading" in loading.source
    assert down.tokens is None and "refused" in down.source and "loading" not in down.source


async def test_llamacpp_lists_its_model(client: httpx2.AsyncClient) -> None:
    with ScriptedLlamaCpp(n_ctx=8192, model="qwen3-8b-q4") as server:
        listed = await served_models("llamacpp", server.root, client=client)
    assert [(m.name, m.window) for m in listed] == [("qwen3-8b-q4", 8192)]


# --- vLLM and OpenAI -----------------------------------------------------------------------


async def test_vllm_serves_max_model_len(client: httpx2.AsyncClient) -> None:
    with ScriptedVllm({"Qwen/Qwen3-8B": 8192, "small": 2048}) as server:
        window = await served_window("vllm", server.root + "/v1", "Qwen/Qwen3-8B", client=client)
        other = await served_window("vllm", server.root, "missing", client=client)
        listed = await served_models("vllm", server.root, client=client)
    assert window.tokens == 8192 and "max_model_len" in window.source
    assert other.tokens is None and "Qwen/Qwen3-8B" in other.source
    assert listed == [
        ServedModel("Qwen/Qwen3-8B", 8192, "vLLM /v1/models: max_model_len 8192"),
        ServedModel("small", 2048, "vLLM /v1/models: max_model_len 2048"),
    ]


async def test_openai_says_no_window_and_lists_ids(client: httpx2.AsyncClient) -> None:
    with ScriptedVllm({"gpt-x": 8192}) as server:
        window = await served_window("openai", server.root + "/v1", "gpt-x", client=client)
        listed = await served_models("openai", server.root + "/v1", client=client)
        assert server.heard() and all(h.path == "/v1/models" for h in server.heard())
    assert window == ServedWindow(None, "the endpoint does not say")
    assert [m.name for m in listed] == ["gpt-x"] and listed[0].window is None


async def test_a_local_server_also_chats_at_its_openai_base() -> None:
    with ScriptedOllama({"qwen3:8b": {"trained": 40960, "loaded": 4096}}) as server:
        server.chat.push("hello from the local model")
        settings = LLMSettings(
            providers=[{"name": "local", "kind": "ollama", "base_url": server.root}],
            chain=["local/qwen3:8b"],
            max_retries=0,
        )
        llm = ProviderChain(settings)
        try:
            events = [e async for e in llm.chat([Message(role="user", content="hi")], [])]
        finally:
            await llm.aclose()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "hello from the local model"
    )
    assert server.count("/v1/chat/completions") == 1


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ollama", "llamacpp", "vllm"])
async def test_a_server_that_is_down(
    kind: str, client: httpx2.AsyncClient, refused_port: int
) -> None:
    root = f"http://127.0.0.1:{refused_port}"
    window = await served_window(kind, root, "m", client=client)  # type: ignore[arg-type]
    assert window.tokens is None
    assert f"connection refused by 127.0.0.1:{refused_port}" in window.source
    assert await served_models(kind, root, client=client) == []  # type: ignore[arg-type]


async def test_a_server_that_never_answers_is_a_timeout() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        root = f"http://127.0.0.1:{silent.getsockname()[1]}"
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(0.3)) as quick:
            window = await served_window("vllm", root, "m", client=quick)
    assert window.tokens is None and "timeout" in window.source


@pytest.mark.parametrize(
    ("path", "status", "raw"),
    [
        ("/props", 200, b"<html>not json</html>"),
        ("/props", 200, b'{"default_generation_settings": {"n_ctx": "many"}}'),
        ("/props", 200, b'{"default_generation_settings": {"n_ctx": -1}}'),
        ("/props", 200, b"[1, 2, 3]"),
        ("/props", 500, b'{"error": {"message": "boom"}}'),
    ],
)
async def test_llamacpp_garbage_is_a_reason(
    path: str, status: int, raw: bytes, client: httpx2.AsyncClient
) -> None:
    with ScriptedLlamaCpp() as server:
        server.answer_raw[path] = (status, raw)
        window = await served_window("llamacpp", server.root, "qwen", client=client)
    assert window.tokens is None and window.source


async def test_ollama_garbage_from_ps_falls_back_to_show(client: httpx2.AsyncClient) -> None:
    with ScriptedOllama({"qwen3:8b": {"trained": 40960, "num_ctx": 8192, "loaded": 2048}}) as s:
        s.answer_raw["/api/ps"] = (200, b'{"models": "loaded"}')
        window = await served_window("ollama", s.root, "qwen3:8b", client=client)
        # Releases before context_length was in /api/ps list a loaded model without it.
        old = {"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "size": 5_000_000_000}]}
        s.answer_raw["/api/ps"] = (200, json.dumps(old).encode())
        older = await served_window("ollama", s.root, "qwen3:8b", client=client)
        s.answer_raw["/api/show"] = (200, b'{"model_info": []}')
        broken = await served_window("ollama", s.root, "qwen3:8b", client=client)
    assert window.tokens == older.tokens == 8192
    assert broken.tokens is None and "model_info" in broken.source


async def test_the_key_is_sent_and_never_in_a_reason(client: httpx2.AsyncClient) -> None:
    with ScriptedVllm({"m": 8192}, api_key=KEY) as server:
        served = await served_window("vllm", server.root, "m", client=client, api_key=KEY)
        refused = await served_window("vllm", server.root, "m", client=client, api_key="sk-x")
        without = await served_window("vllm", server.root, "m", client=client)
    assert served.tokens == 8192
    assert refused.tokens is None and "refused the API key" in refused.source
    assert without.tokens is None and "wants an API key" in without.source
    assert "sk-x" not in refused.source
    with ScriptedLlamaCpp(api_key=KEY) as server:
        # A server that echoes the key back in its error must not have it repeated.
        server.answer_raw["/props"] = (500, json.dumps({"error": f"bad {KEY}"}).encode())
        echoed = await served_window("llamacpp", server.root, "q", client=client, api_key=KEY)
        listed = await served_models("llamacpp", server.root, client=client, api_key=KEY)
    assert KEY not in echoed.source and "***" in echoed.source
    assert all(KEY not in m.source for m in listed)


# --- any answer at all ---------------------------------------------------------------------

_KEYS = st.sampled_from(
    [
        "models",
        "data",
        "id",
        "name",
        "model",
        "context_length",
        "max_model_len",
        "model_info",
        "general.architecture",
        "qwen3.context_length",
        "parameters",
        "default_generation_settings",
        "n_ctx",
        "total_slots",
        "error",
        "message",
    ]
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.sampled_from(["qwen3", "m", "num_ctx 4096", "num_ctx x\nnum_ctx 0"])
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS | st.text(), inner),
    max_leaves=25,
)


@settings(max_examples=150)
@given(
    answer=_JSON | st.binary(max_size=40),
    status=st.sampled_from([200, 200, 200, 401, 404, 503]),
)
def test_any_answer_gives_a_window_or_a_reason(answer: object, status: int) -> None:
    raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=raw, headers={"content-type": "application/json"})

    async def ask_every_kind() -> None:
        transport = httpx2.MockTransport(handler)
        async with httpx2.AsyncClient(transport=transport) as client:
            for kind in ("ollama", "llamacpp", "vllm", "openai"):
                window = await served_window(kind, "http://127.0.0.1:9", "m", client=client)  # type: ignore[arg-type]
                assert window.tokens is None or window.tokens > 0
                assert window.tokens is not None or window.source
                listed = await served_models(kind, "http://127.0.0.1:9", client=client)  # type: ignore[arg-type]
                assert all(isinstance(m.name, str) for m in listed)

    anyio.run(ask_every_kind)
