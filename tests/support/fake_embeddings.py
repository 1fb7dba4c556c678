"""A scripted `/v1/embeddings` server on 127.0.0.1 speaking OpenAI's documented format.

Vectors are deterministic: a bag of concepts. The synonyms in `CONCEPTS` share one
dimension ("car" and "automobile" land in the same one); every other word is hashed into
the remaining dimensions; a text's vector counts them. The server
records every input it embedded and answers the statuses queued in `fail_next` (one per
request) before it answers again. With `pause_at = n`, the n-th request (and every later one)
waits: `paused` is set when one waits, and they go on once `release` is set.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIM = 64
MODEL = "scripted-embed"
# Words of one meaning (and their forms) share one concept.
CONCEPTS: dict[str, str] = {
    **dict.fromkeys(["allergy", "allergic", "allergies", "intolerant", "intolerance"], "ALLERGY"),
    **dict.fromkeys(["peanut", "peanuts", "groundnut", "groundnuts", "nuts"], "PEANUT"),
    **dict.fromkeys(["car", "automobile", "vehicle", "motor"], "CAR"),
    **dict.fromkeys(["sister", "sibling"], "SISTER"),
    **dict.fromkeys(["birthday", "born", "anniversary"], "BIRTHDAY"),
    **dict.fromkeys(["password", "secret", "passphrase"], "SECRET"),
}
_STOP = {"the", "a", "an", "i", "is", "my", "to", "of", "and", "what", "do", "you", "am", "me"}


# Each concept has a dimension of its own; any other word is hashed into the rest, so
# words of unrelated filler never land on a concept's dimension.
_CONCEPT_DIM = {name: i for i, name in enumerate(sorted(set(CONCEPTS.values())))}


def concept_vector(text: str, dim: int = DIM) -> list[float]:
    vector = [0.0] * dim
    free = dim - len(_CONCEPT_DIM)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _STOP:
            continue
        if word in CONCEPTS:
            vector[_CONCEPT_DIM[CONCEPTS[word]]] += 1.0
            continue
        digest = hashlib.sha256(word.encode()).digest()
        vector[len(_CONCEPT_DIM) + int.from_bytes(digest[:4], "big") % free] += 1.0
    return vector


@dataclass
class EmbeddingsServer:
    dim: int = DIM
    model: str = MODEL
    fail_next: list[int] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    requests: int = 0
    refuse_word: str = ""
    """A request holding a text with this word is refused with 400, as a model refuses a
    text it will not take."""
    pause_at: int | None = None
    paused: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> EmbeddingsServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    number = outer.requests + 1
                if outer.pause_at is not None and number >= outer.pause_at:
                    outer.paused.set()
                    outer.release.wait(120)  # a bound for a broken run only
                status, payload = outer.answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests += 1
            if path != "/v1/embeddings":
                return 404, {"error": {"message": "not found"}}
            if self.fail_next:
                status = self.fail_next.pop(0)
                return status, {"error": {"message": f"scripted {status}", "type": "server"}}
            texts: Sequence[str] = body["input"]
            if self.refuse_word and any(self.refuse_word in t for t in texts):
                return 400, {"error": {"message": "input refused", "type": "invalid_request"}}
            self.inputs.extend(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": concept_vector(t, self.dim)}
            for i, t in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
