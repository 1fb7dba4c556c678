"""A scripted `/v1/audio/speech` server on 127.0.0.1 (an OpenAI text-to-speech stand-in).

It speaks the documented API: a JSON body with `model`, `input`, `voice` and
`response_format`, answered with the audio's bytes. The audio is real Ogg/Opus it makes
with libsndfile (soundfile): a tone whose length follows the text (`seconds_for`), so a test
can decode what squidd sent and check the duration it claims. It records what it heard;
`status`, `body` and `hold` script failures (an error status, bytes that are not Ogg/Opus,
an answer held until the test lets it go, for the client's timeout).
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import soundfile

RATE = 48_000


def seconds_for(text: str) -> float:
    """How long the scripted voice speaks `text`: 40 ms a character, 0.5 s to 6 s."""
    return min(6.0, max(0.5, 0.04 * len(text)))


def ogg_opus_tone(seconds: float, *, rate: int = RATE, hz: float = 330.0) -> bytes:
    """`seconds` of a tone, fading in, as Ogg/Opus bytes (mono)."""
    t = np.arange(round(seconds * rate)) / rate
    wave = 0.4 * np.sin(2 * np.pi * hz * t) * np.minimum(1.0, t * 4)
    out = io.BytesIO()
    soundfile.write(out, wave.astype("float32"), rate, format="OGG", subtype="OPUS")
    return out.getvalue()


@dataclass
class Spoken:
    path: str
    headers: dict[str, str]
    request: dict[str, Any]


@dataclass
class SpeechServer:
    status: int = 200
    body: bytes | None = None
    """Answer these bytes instead of the audio (e.g. an MP3, an HTML page)."""
    hold: threading.Event | None = None
    """When set, each answer waits until the event is set (or the server stops)."""
    heard: list[Spoken] = field(default_factory=list)
    answered: threading.Event = field(default_factory=threading.Event)
    """Set once a request was heard (before it is answered)."""

    def __enter__(self) -> SpeechServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                request = json.loads(raw)
                outer.heard.append(Spoken(self.path, dict(self.headers), request))
                outer.answered.set()
                if outer.hold is not None:
                    outer.hold.wait()
                if outer.status != 200:
                    payload, kind = b'{"error": {"message": "scripted failure"}}', "json"
                elif outer.body is not None:
                    payload, kind = outer.body, "octet-stream"
                else:
                    payload = ogg_opus_tone(seconds_for(request["input"]))
                    kind = "ogg"
                self.send_response(outer.status)
                self.send_header(
                    "Content-Type", "audio/ogg" if kind == "ogg" else f"application/{kind}"
                )
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def texts(self) -> list[str]:
        return [spoken.request["input"] for spoken in self.heard]

    def __exit__(self, *exc: object) -> None:
        if self.hold is not None:
            self.hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
