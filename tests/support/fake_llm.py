"""A scripted OpenAI-compatible chat server on 127.0.0.1 for end-to-end tests.

It runs in a background thread (so a daemon under test, in this process or a child
process, can reach it), answers `POST /v1/chat/completions` streamed or not, and records
every request. Replies come from a queue of scripted replies, else from a responder
function, else a default echo. Each reply is a `Reply`: text, tool calls, an HTTP error
status to return instead, a delay before answering (the model's latency), or the token
usage to report, or a `Gate` that holds the stream part way until the test lets it go on.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Gate:
    """Holds a streamed reply part way: `reached` is set when the stream gets there; it goes
    on once the test sets `release` (or after `timeout` seconds, so a failed test ends)."""

    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    timeout: float = 120.0


@dataclass
class Reply:
    content: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    # Break the stream after this many content characters (simulates a dropped connection).
    cut_after: int | None = None
    # Usage the provider reports at the end of the stream: (prompt, completion, cached).
    usage: tuple[int, int, int] | None = None
    # The error's `code` in an error response (e.g. "context_length_exceeded").
    error_code: str | None = None
    # How the content streams: pieces of this many characters, this many seconds apart.
    piece_chars: int = 7
    piece_delay: float = 0.0
    # Hold the stream at `gate` once this many content characters went out.
    gate: Gate | None = None
    gate_after: int = 0
    # Headers of an error response (`Retry-After`, `x-ratelimit-reset-requests`).
    headers: dict[str, str] = field(default_factory=dict)


def error_body(reply: Reply) -> dict[str, Any]:
    """The JSON body of a scripted error response, as OpenAI shapes it."""
    error: dict[str, Any] = {"message": f"scripted {reply.status}", "type": "server"}
    if reply.status == 429 and reply.error_code is None:
        error.update(type="rate_limit_exceeded", code="rate_limit_exceeded")
    if reply.error_code == "insufficient_quota":
        error.update(code="insufficient_quota", type="insufficient_quota")
        error["message"] = "You exceeded your current quota, please check your plan."
    elif reply.status in (401, 403):
        error.update(code="invalid_api_key", type="invalid_request_error")
        error["message"] = "Incorrect API key provided."
    elif reply.error_code is not None:
        error.update(code=reply.error_code, type="invalid_request_error")
        error["message"] = f"scripted {reply.error_code}"
    return {"error": error}


Responder = Callable[[dict[str, Any]], Reply]


def _last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def echo_responder(request: dict[str, Any]) -> Reply:
    return Reply(content=f"echo: {_last_user_text(request)}")


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) resets connections when many turns start at once.
    request_queue_size = 256


class FakeLLM:
    """Start with `with FakeLLM() as llm:`; point `llm.base_url` at it."""

    def __init__(self, responder: Responder | None = None, model: str = "fake-model") -> None:
        self.model = model
        self.responder: Responder = responder or echo_responder
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        # The bearer key of each chat request, in order ("" when none was sent).
        self.keys: list[str] = []
        # Bearer keys answered 401 on every request (a key the provider refuses).
        self.refused_keys: set[str] = set()
        # Requests being answered right now, and the most there ever were at once.
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self._thread: threading.Thread | None = None

    # --- scripting ---------------------------------------------------------------------
    def push(self, *replies: Reply | str) -> None:
        with self._lock:
            for reply in replies:
                self.script.append(Reply(content=reply) if isinstance(reply, str) else reply)

    def next_reply(self, request: dict[str, Any], key: str = "") -> Reply:
        with self._lock:
            self.requests.append(request)
            self.keys.append(key)
            if self.script:
                return self.script.pop(0)
        return self.responder(request)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.requests)

    # --- server ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def start(self, port: int = 0) -> FakeLLM:
        """Listen on 127.0.0.1:`port` (0: a free one; a port it had before: back again)."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body (and each streamed event) go out as separate writes: with
            # Nagle's algorithm on, the second waits for the client's delayed ACK, about
            # 40 ms a request, which a benchmark would count as the model's latency.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                return

            def setup(self) -> None:
                super().setup()
                with owner._lock:
                    owner._connections.add(self.connection)

            def finish(self) -> None:
                with owner._lock:
                    owner._connections.discard(self.connection)
                super().finish()

            def _json(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _refused(self) -> bool:
                auth = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if auth not in owner.refused_keys:
                    return False
                self._json(401, {"error": {"message": "Invalid API key", "type": "auth"}})
                return True

            def do_GET(self) -> None:
                if self._refused():
                    return
                if self.path.endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": owner.model}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                if self._refused():
                    return
                if not self.path.endswith("/chat/completions"):
                    self._json(404, {"error": {"message": "not found"}})
                    return
                auth = self.headers.get("Authorization", "")
                reply = owner.next_reply(request, auth.removeprefix("Bearer "))
                with owner._lock:
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                try:
                    self._answer(request, reply)
                finally:
                    with owner._lock:
                        owner.in_flight -= 1

            def _answer(self, request: dict[str, Any], reply: Reply) -> None:
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    self._json(reply.status, error_body(reply), reply.headers)
                    return
                if request.get("stream"):
                    self._stream(reply, request.get("model", owner.model))
                else:
                    self._json(200, _completion(reply, request.get("model", owner.model)))

            def _stream(self, reply: Reply, model: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for event in _stream_events(reply, model):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except _Cut:
                    self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up (its timeout): nothing left to answer.
                    self.close_connection = True

        self._server = _Server(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut the connections still open (kept-alive ones too): the
        server is gone, as a crashed or stopped model server is."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            open_now = list(self._connections)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Cut(Exception):
    pass


def _chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _stream_events(reply: Reply, model: str) -> Iterator[bytes]:
    cid = "chatcmpl-" + uuid.uuid4().hex[:12]
    yield _chunk(cid, model, {"role": "assistant", "content": ""})
    text = reply.content
    sent = 0
    for i in range(0, len(text), reply.piece_chars):
        piece = text[i : i + reply.piece_chars]
        if reply.piece_delay and i:
            time.sleep(reply.piece_delay)  # a slow model, written piece by piece
        yield _chunk(cid, model, {"content": piece})
        sent += len(piece)
        if reply.gate is not None and sent - len(piece) < reply.gate_after <= sent:
            reply.gate.reached.set()
            reply.gate.release.wait(reply.gate.timeout)
        if reply.cut_after is not None and sent >= reply.cut_after:
            raise _Cut
    for idx, (name, args) in enumerate(reply.tool_calls):
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        first = {"index": idx, "id": call_id, "type": "function"}
        yield _chunk(
            cid, model, {"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]}
        )
        raw = args if isinstance(args, str) else json.dumps(args)
        for i in range(0, len(raw), 9):
            frag = {"index": idx, "function": {"arguments": raw[i : i + 9]}}
            yield _chunk(cid, model, {"tool_calls": [frag]})
    yield _chunk(cid, model, {}, finish="tool_calls" if reply.tool_calls else "stop")
    if reply.usage is not None:
        obj = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [],
            "usage": _usage(reply.usage),
        }
        yield b"data: " + json.dumps(obj).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for name, args in reply.tool_calls
        ]
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": _usage(reply.usage or (1, 1, 0)),
    }


def _usage(usage: tuple[int, int, int]) -> dict[str, Any]:
    """A `usage` object as OpenAI reports it, from (prompt, completion, cached) tokens."""
    prompt, completion, cached = usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
