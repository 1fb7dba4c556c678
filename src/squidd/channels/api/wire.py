"""The OpenAI wire format the API channel speaks: request parsing, replies, stream chunks
and errors, as plain functions over JSON-ready dicts.

Only the last user message of a request is the input: squidd's memory is the history, so a
client's message list is not trusted to rewrite it. Its content may be a string or the
list-of-parts form (the text parts are joined; other parts are named, not read).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

CONVERSATION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")
MAX_INPUT_CHARS = 200_000


class BadRequest(ValueError):
    """The request is not one the endpoint answers; `status` and `code` say how."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        code: str = "invalid_request",
        retry_after: int = 0,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class ChatRequest:
    text: str
    stream: bool
    user: str
    model: str = ""


def valid_conversation(name: str) -> str:
    """`name` if it is a conversation name (letters, digits, `_.@-`, no `..`, at most 64)."""
    if not CONVERSATION_NAME.match(name) or ".." in name:
        raise BadRequest(
            "a conversation name is 1-64 letters, digits or _.@- and starts with a letter or digit",
            code="invalid_conversation",
        )
    return name


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if not isinstance(part, dict):
                raise BadRequest("a message content part must be an object")
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(f"[{str(part.get('type', 'part'))[:40]} not read]")
        return "\n".join(parts)
    raise BadRequest("a message's content must be a string or a list of parts")


def parse_chat(body: bytes) -> ChatRequest:
    """A chat completion request's input, stream flag and `user`; `BadRequest` otherwise."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not valid JSON", code="invalid_json") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise BadRequest("messages holds no user message")
    text = _content_text(users[-1].get("content"))
    if not text.strip():
        raise BadRequest("the last user message is empty")
    if len(text) > MAX_INPUT_CHARS:
        raise BadRequest(f"the last user message is over {MAX_INPUT_CHARS} characters")
    stream = data.get("stream", False)
    user = data.get("user", "")
    model = data.get("model", "")
    if not isinstance(stream, bool) or not isinstance(user, str) or not isinstance(model, str):
        raise BadRequest("stream must be a boolean, user and model strings")
    return ChatRequest(text=text, stream=stream, user=user, model=model)


def error(message: str, *, kind: str, code: str) -> dict[str, Any]:
    """The OpenAI error shape."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def completion(completion_id: str, model: str, text: str, created: float) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(created),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


def chunk(
    completion_id: str, model: str, created: float, delta: dict[str, Any], finish: str | None
) -> bytes:
    """One SSE event of a streamed completion."""
    body = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(created),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body, ensure_ascii=False).encode("utf-8") + b"\n\n"


DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": working\n\n"


def models(model: str, agents: tuple[str, ...] = ()) -> dict[str, Any]:
    """The endpoint's model, then each agent by name (a request's `model` picks one)."""
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "squidd"}
            for name in dict.fromkeys((model, *agents))
        ],
    }
