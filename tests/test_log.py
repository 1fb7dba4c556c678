"""Logging: JSON lines off a terminal, and no secret ever rendered."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from squidd.config import Settings
from squidd.log import configure_logging
from squidd.secrets import known_secrets


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


def render(**event: object) -> dict[str, object]:
    out = io.StringIO()
    configure_logging("info", "auto", known_secrets=["hunter2-long-secret"], stream=out)
    structlog.get_logger().info("something_happened", **event)
    line = out.getvalue().strip().splitlines()[-1]
    result: dict[str, object] = json.loads(line)
    return result


def test_json_when_not_a_terminal() -> None:
    event = render(session="s1", ms=12)
    assert event["event"] == "something_happened"
    assert event["session"] == "s1"
    assert event["level"] == "info"
    assert "timestamp" in event


def test_secret_keys_and_values_are_redacted() -> None:
    event = render(
        password="pw-value",
        api_key="sk-abcdefghijklmnop",
        detail="login with hunter2-long-secret failed",
        url="https://host/_matrix?access_token=syt_abcdefghijkl&x=1",
        header="Bearer abcdefghijklmnopqrstuvwxyz",
    )
    text = json.dumps(event)
    for secret in ("pw-value", "sk-abcdefghijklmnop", "hunter2-long-secret", "syt_abcdefghijkl"):
        assert secret not in text
    assert "abcdefghijklmnopqrstuvwxyz" not in text
    assert event["password"] == "[redacted]"


def a_failed_login_logged(renderer: str) -> str:
    """What logging a failed login's exception (its message holds a known secret) with
    `renderer` writes."""
    out = io.StringIO()
    configure_logging("info", renderer, known_secrets=["hunter2-long-secret"], stream=out)

    def login() -> None:
        raise RuntimeError("auth failed for hunter2-long-secret")

    try:
        login()
    except RuntimeError:
        structlog.get_logger().exception("login_failed")
    return out.getvalue()


def test_exception_text_is_scrubbed() -> None:
    logged = a_failed_login_logged("json")
    assert "hunter2-long-secret" not in logged
    assert "login_failed" in logged


def test_known_secrets_collects_every_secret_field() -> None:
    settings = Settings.model_validate(
        {"llm": {"api_key": "sk-one-1234"}, "email": {"password": "mail-pass-5678"}}
    )
    assert set(known_secrets(settings)) >= {"sk-one-1234", "mail-pass-5678"}


def test_exception_text_is_scrubbed_on_a_terminal_too() -> None:
    """The console renderer (`squidd chat`, `squidd run` on a terminal) formats tracebacks
    itself; a secret in one must not reach the screen either."""
    logged = a_failed_login_logged("console")
    assert "login_failed" in logged
    assert "RuntimeError" in logged
    assert "hunter2-long-secret" not in logged


def test_library_warnings_through_the_stdlib_are_scrubbed() -> None:
    """matrix-nio, aioimaplib and apscheduler log through `logging`, not structlog: their
    lines (a failed request's URL with its access token, say) are scrubbed as well."""
    out = io.StringIO()
    configure_logging("info", "json", known_secrets=["hunter2-long-secret"], stream=out)
    library = logging.getLogger("nio.client")
    library.warning("sync failed: %s", "https://hs/_matrix?access_token=syt_abcdefghijkl")

    def login() -> None:
        raise RuntimeError("login with hunter2-long-secret refused")

    try:
        login()
    except RuntimeError:
        library.exception("login failed")
    text = out.getvalue()
    assert "sync failed" in text
    assert "login failed" in text
    assert "syt_abcdefghijkl" not in text
    assert "hunter2-long-secret" not in text


def test_library_records_are_one_json_object_per_line() -> None:
    """journald gets one JSON object per line from libraries too: a multi-line warning (nio's
    schema errors) and an exception with its traceback each stay one line, scrubbed."""
    out = io.StringIO()
    configure_logging("info", "json", known_secrets=["hunter2-long-secret"], stream=out)
    library = logging.getLogger("nio.responses")
    library.warning(
        "Error validating event: 42 is not of type 'string'\n\nFailed validating 'type'"
        "\n    {'type': 'string'}\nwith hunter2-long-secret"
    )

    def login() -> None:
        raise RuntimeError("refused for hunter2-long-secret\nsecond line of the error")

    try:
        login()
    except RuntimeError:
        library.exception("login failed for %s", "@bot:example.org")
    library.info("below the libraries' level: not shown")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    warning, error = (json.loads(line) for line in lines)
    assert warning["logger"] == "nio.responses"
    assert warning["level"] == "warning"
    assert warning["event"].startswith("Error validating event: 42")
    assert "Failed validating 'type'" in warning["event"]
    assert "timestamp" in warning
    assert error["level"] == "error"
    assert error["event"] == "login failed for @bot:example.org"
    assert "Traceback (most recent call last)" in error["exception"]
    assert "second line of the error" in error["exception"]
    assert "hunter2-long-secret" not in out.getvalue()


def _fail_with(text: str) -> None:
    raise ValueError(text)


HOSTILE_ID = "!room\x00:x\x1b[2J\x1b]0;pwned\x07\rFAKE_LINE level=error\ud800\x85"


def test_the_console_renderer_escapes_control_bytes_as_the_json_renderer_does() -> None:
    """A hostile id (a room, a mail address) reaches a terminal as text: no raw NUL, escape
    sequence, carriage return or lone surrogate, in our events, a library's record or a
    traceback."""
    out = io.StringIO()
    configure_logging("info", "console", stream=out)
    structlog.get_logger().warning("matrix_message_ignored", room=HOSTILE_ID)
    logging.getLogger("nio.test").warning("bad room %s", HOSTILE_ID)
    try:
        _fail_with(HOSTILE_ID)
    except ValueError:
        structlog.get_logger().exception("matrix_event_failed")
    text = out.getvalue()
    text.encode("utf-8")  # no lone surrogate reached the stream
    raw = [ch for ch in text if ch != "\n" and (ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F)]
    assert raw == []
    # Written as the JSON renderer writes it (the console renderer may quote it on top).
    escaped = json.dumps(HOSTILE_ID)[1:-1]
    assert "\\u0000:x\\u001b[2J\\u001b]0;pwned\\u0007\\rFAKE_LINE" in escaped
    lines = [line for line in text.splitlines() if "FAKE_LINE" in line]
    assert len(lines) == 3, text
    assert escaped in lines[1] and escaped in lines[2]  # the library's record, the traceback
    assert escaped.replace("\\", "\\\\") in lines[0]  # ours, quoted with repr()
