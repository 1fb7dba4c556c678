"""Scripted local model servers on 127.0.0.1 (Ollama, llama.cpp's server, vLLM).

Each runs in a background thread like `tests/support/fake_llm.py` and speaks the documented
API its real counterpart does, in the shapes those servers answer: Ollama's `/api/show`,
`/api/ps`, `/api/tags` and `/api/version` (ollama's docs/api.md); llama.cpp's `/props`,
`/health` and `/v1/models` (its tools/server/README.md: 503 "Loading model" on every
endpoint while the model loads, `/health` needing no key); vLLM's `/v1/models` with
`max_model_len`. Each also chats: `POST /v1/chat/completions` is answered by a `FakeLLM`'s
script (`server.chat.push(...)`), streamed or not, so a local server is a whole endpoint.

Every request is recorded as `Heard(method, path, body)`; `count(path)` counts them.
`answer_raw[path] = (status, bytes)` makes a path answer anything (garbage tests); with
`api_key` set, everything but llama.cpp's `/health` wants `Authorization: Bearer <key>`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.support.fake_llm import FakeLLM, _completion, _Cut, _stream_events, error_body

_MODIFIED = "2026-11-01T10:00:00.000000000Z"
_DIGEST = "a" * 64


@dataclass(frozen=True)
class Heard:
    method: str
    path: str
    body: dict[str, Any] | None


Answer = tuple[int, Any]


class _Scripted:
    """The HTTP part every scripted server shares; subclasses answer `route`."""

    def __init__(self, *, api_key: str | None = None, chat_model: str = "local") -> None:
        self.api_key = api_key
        self.chat = FakeLLM(model=chat_model)  # its script answers the chat requests
        self.requests: list[Heard] = []
        self.answer_raw: dict[str, tuple[int, bytes]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # --- what subclasses say ---------------------------------------------------------------
    def route(self, method: str, path: str, body: dict[str, Any] | None) -> Answer:
        raise NotImplementedError

    def public(self, path: str) -> bool:
        """A path that needs no key."""
        return False

    def refused(self) -> Answer:
        return 401, {"error": {"message": "Invalid API Key", "type": "authentication_error"}}

    # --- recording -------------------------------------------------------------------------
    def count(self, path: str) -> int:
        with self._lock:
            return sum(1 for heard in self.requests if heard.path == path)

    def heard(self) -> list[Heard]:
        with self._lock:
            return list(self.requests)

    # --- the server ------------------------------------------------------------------------
    @property
    def root(self) -> str:
        """The server's root URL (what a user writes as base_url, without /v1)."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._handle("GET", None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = None
                self._handle("POST", body if isinstance(body, dict) else None)

            def _handle(self, method: str, body: dict[str, Any] | None) -> None:
                path = self.path.split("?", 1)[0]
                with owner._lock:
                    owner.requests.append(Heard(method, path, body))
                if path in owner.answer_raw:
                    status, raw = owner.answer_raw[path]
                    return self._send(status, raw, "application/json")
                wanted = f"Bearer {owner.api_key}" if owner.api_key else None
                sent = self.headers.get("Authorization")
                if wanted and sent != wanted and not owner.public(path):
                    return self._json(*owner.refused())
                if method == "POST" and path == "/v1/chat/completions" and body is not None:
                    return self._chat(body)
                return self._json(*owner.route(method, path, body))

            def _send(self, status: int, raw: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _json(self, status: int, payload: Any) -> None:
                self._send(status, json.dumps(payload).encode(), "application/json")

            def _chat(self, request: dict[str, Any]) -> None:
                reply = owner.chat.next_reply(request)
                model = str(request.get("model", owner.chat.model))
                if reply.status != 200:
                    return self._json(reply.status, error_body(reply))
                if not request.get("stream"):
                    return self._json(200, _completion(reply, model))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for event in _stream_events(reply, model):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (_Cut, BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _details(family: str) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family,
        "families": [family],
        "parameter_size": "8.2B",
        "quantization_level": "Q4_K_M",
    }


class ScriptedOllama(_Scripted):
    """`models`: name -> {"trained": int, "num_ctx": int | None, "loaded": int | None,
    "arch": str (default "qwen3")}; "loaded" is the context a loaded model runs with."""

    def __init__(self, models: dict[str, dict[str, Any]], **options: Any) -> None:
        super().__init__(**options)
        self.models = models
        self.version = "0.12.6"
        # /api/show answers wait for `let_show` (set: at once); `held` is set once
        # `hold_at` of them wait together; `most_showing` is the most there were at once.
        self.let_show = threading.Event()
        self.let_show.set()
        self.held = threading.Event()
        self.hold_at = 0
        self.most_showing = 0
        self._showing = 0

    def refused(self) -> Answer:
        return 401, {"error": "unauthorized"}

    def route(self, method: str, path: str, body: dict[str, Any] | None) -> Answer:
        if (method, path) == ("GET", "/api/version"):
            return 200, {"version": self.version}
        if (method, path) == ("GET", "/api/tags"):
            return 200, {"models": [self._tag(name) for name in self.models]}
        if (method, path) == ("GET", "/api/ps"):
            loaded = [name for name, spec in self.models.items() if spec.get("loaded")]
            return 200, {"models": [self._running(name) for name in loaded]}
        if (method, path) == ("POST", "/api/show"):
            return self._held_show(str((body or {}).get("model", "")))
        return 404, "404 page not found"

    def _held_show(self, asked: str) -> Answer:
        with self._lock:
            self._showing += 1
            self.most_showing = max(self.most_showing, self._showing)
            if self.hold_at and self._showing >= self.hold_at:
                self.held.set()
        try:
            self.let_show.wait(60)  # bounded so a failed test ends
            return self._show(asked)
        finally:
            with self._lock:
                self._showing -= 1

    def _find(self, name: str) -> str | None:
        full = name if ":" in name else name + ":latest"
        return next((known for known in self.models if known in (name, full)), None)

    def _tag(self, name: str) -> dict[str, Any]:
        arch = self.models[name].get("arch", "qwen3")
        return {
            "name": name,
            "model": name,
            "modified_at": _MODIFIED,
            "size": 5_225_388_164,
            "digest": _DIGEST,
            "details": _details(arch),
        }

    def _running(self, name: str) -> dict[str, Any]:
        entry = self._tag(name)
        del entry["modified_at"]
        entry.update(
            expires_at="2026-11-27T22:10:00.000000000Z",
            size_vram=5_900_000_000,
            context_length=self.models[name]["loaded"],
        )
        return entry

    def _show(self, asked: str) -> Answer:
        name = self._find(asked)
        if name is None:
            return 404, {"error": f"model '{asked}' not found"}
        spec = self.models[name]
        arch = spec.get("arch", "qwen3")
        parameters = [
            'stop                           "<|im_end|>"',
            "temperature                    0.6",
        ]
        if spec.get("num_ctx") is not None:
            parameters.insert(0, f"num_ctx                        {spec['num_ctx']}")
        return 200, {
            "license": "Apache License 2.0",
            "modelfile": f"FROM {name}\n",
            "parameters": "\n".join(parameters),
            "template": "{{ .Prompt }}",
            "details": _details(arch),
            "model_info": {
                "general.architecture": arch,
                "general.parameter_count": 8_190_735_360,
                f"{arch}.block_count": 36,
                f"{arch}.context_length": spec["trained"],
                f"{arch}.embedding_length": 4096,
            },
            "capabilities": ["completion", "tools"],
            "modified_at": _MODIFIED,
        }


class ScriptedLlamaCpp(_Scripted):
    """One model served with `n_ctx` per slot; `loading=True` answers as the server does
    while the model loads; `top_level_n_ctx=True` gives `n_ctx` at the top of /props only
    (as some versions did)."""

    def __init__(self, n_ctx: int = 4096, model: str = "qwen", **options: Any) -> None:
        super().__init__(chat_model=model, **options)
        self.n_ctx = n_ctx
        self.model = model
        self.slots = 1
        self.loading = False
        self.top_level_n_ctx = False

    def public(self, path: str) -> bool:
        return path in ("/health", "/v1/health")

    def route(self, method: str, path: str, body: dict[str, Any] | None) -> Answer:
        if self.loading:
            error = {"code": 503, "message": "Loading model", "type": "unavailable_error"}
            return 503, {"error": error}
        if path in ("/health", "/v1/health"):
            return 200, {"status": "ok"}
        if (method, path) == ("GET", "/props"):
            return 200, self._props()
        if (method, path) in (("GET", "/v1/models"), ("GET", "/models")):
            meta = {"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 40960, "n_embd": 4096}
            entry = {"id": self.model, "object": "model", "created": 1, "owned_by": "llamacpp"}
            return 200, {"object": "list", "data": [{**entry, "meta": meta}]}
        error = {"code": 404, "message": "File Not Found", "type": "not_found_error"}
        return 404, {"error": error}

    def _props(self) -> dict[str, Any]:
        props: dict[str, Any] = {
            "total_slots": self.slots,
            "model_path": f"/models/{self.model}.gguf",
            "chat_template": "{{ messages }}",
            "modalities": {"vision": False},
            "build_info": "b6500-0123abc",
            "is_sleeping": False,
        }
        if self.top_level_n_ctx:
            props["n_ctx"] = self.n_ctx
        else:
            props["default_generation_settings"] = {
                "id": 0,
                "n_ctx": self.n_ctx,
                "speculative": False,
                "is_processing": False,
                "params": {"n_predict": -1, "temperature": 0.8},
            }
        return props


class ScriptedVllm(_Scripted):
    """`models`: served name -> max_model_len."""

    def __init__(self, models: dict[str, int], **options: Any) -> None:
        super().__init__(chat_model=next(iter(models), "m"), **options)
        self.models = models

    def refused(self) -> Answer:
        return 401, {"error": "Unauthorized"}

    def route(self, method: str, path: str, body: dict[str, Any] | None) -> Answer:
        if (method, path) == ("GET", "/v1/models"):
            return 200, {"object": "list", "data": [self._card(n) for n in self.models]}
        if (method, path) == ("GET", "/health"):
            return 200, {}
        return 404, {"detail": "Not Found"}

    def _card(self, name: str) -> dict[str, Any]:
        permission = {"id": "modelperm-0", "object": "model_permission", "allow_sampling": True}
        return {
            "id": name,
            "object": "model",
            "created": 1,
            "owned_by": "vllm",
            "root": f"/models/{name}",
            "parent": None,
            "max_model_len": self.models[name],
            "permission": [permission],
        }
