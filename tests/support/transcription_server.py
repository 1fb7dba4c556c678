"""A scripted `/v1/audio/transcriptions` server on 127.0.0.1 (a whisper stand-in).

It records each request (headers, the multipart form's fields and file) and answers the
scripted status and text: the HTTP boundary is real, only the speech model is scripted.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Heard:
    path: str
    headers: dict[str, str]
    fields: dict[str, str]
    file_name: str
    file_type: str
    file_bytes: bytes


@dataclass
class TranscriptionServer:
    text: str = "hello from the voice note"
    status: int = 200
    heard: list[Heard] = field(default_factory=list)

    def __enter__(self) -> TranscriptionServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                raw = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body
                message = BytesParser(policy=HTTP).parsebytes(raw)
                fields: dict[str, str] = {}
                name = kind = ""
                data = b""
                for part in message.iter_parts():
                    key = part.get_param("name", header="content-disposition")
                    if part.get_filename():
                        name, kind = part.get_filename() or "", part.get_content_type()
                        data = part.get_payload(decode=True) or b""
                    else:
                        fields[str(key)] = (part.get_payload(decode=True) or b"").decode()
                outer.heard.append(Heard(self.path, dict(self.headers), fields, name, kind, data))
                payload = json.dumps({"text": outer.text}).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
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

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
