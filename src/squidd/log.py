"""structlog setup: JSON lines off a terminal (journald), readable console output on one,
and a processor that redacts secrets from every event before it is rendered.

Libraries (matrix-nio, aioimaplib, apscheduler, ...) log through the stdlib `logging`; their
records go through the same processors and renderer (`structlog.stdlib.ProcessorFormatter`),
so with JSON output every record, a multi-line message or a traceback included, is one JSON
object on one line (`"logger"` names the library), scrubbed like our own events. The console
renderer gets every string with its control characters and lone surrogates escaped the way
the JSON renderer escapes them: values taken from outside (room ids, addresses) reach the
terminal as text, never as terminal commands or forged lines.

Field names mean one thing each: `reason` says what went wrong in words (an exception's
message), `error` names an exception's type, `retry_in_s` is the wait before another try.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

_SECRET_KEY_RE = re.compile(
    r"(pass(word)?|secret|token|api[_-]?key|authorization|credential|cookie)", re.IGNORECASE
)
# Values that look like secrets even under an innocent key.
_SECRET_VALUE_RES = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bsyt_[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
    re.compile(r"(?i)(access_token|api_key|password)=([^&\s]+)"),
)
REDACTED = "[redacted]"


class SecretRedactor:
    """Replaces values of secret-looking keys, and secret-looking substrings, in an event.

    Known secrets (from the settings) are passed in and scrubbed wherever they appear.
    """

    def __init__(self, known_secrets: Iterable[str] = ()) -> None:
        self._known = sorted({s for s in known_secrets if len(s) >= 4}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self._known:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for pattern in _SECRET_VALUE_RES:
            text = pattern.sub(
                lambda m: f"{m.group(1)}={REDACTED}" if m.re.groups >= 2 else REDACTED, text
            )
        return text

    def _clean(self, key: str, value: Any) -> Any:
        if _SECRET_KEY_RE.search(key) and value not in (None, "", False):
            return REDACTED
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {k: self._clean(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._clean(key, v) for v in value)
        if isinstance(value, BaseException):
            return self.scrub(f"{type(value).__name__}: {value}")
        return value

    def __call__(
        self, logger: Any, method: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key in list(event_dict):
            if key == "exc_info":
                continue
            event_dict[key] = self._clean(key, event_dict[key])
        return event_dict


def _scrub_rendered(redactor: SecretRedactor) -> Any:
    def processor(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> Any:
        # Tracebacks are rendered into the "exception" key; scrub them as text.
        exc = event_dict.get("exception")
        if isinstance(exc, str):
            event_dict["exception"] = redactor.scrub(exc)
        return event_dict

    return processor


# What a terminal must not be handed raw: C0 and C1 controls, DEL, and lone surrogates
# (which a TextIO cannot even encode). Written as the JSON renderer writes them (`\u0000`,
# `\n`, `\u001b`), so a hostile id (a Matrix room, a mail address) cannot clear the screen,
# forge a log line or recolour the terminal.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_UNPRINTABLE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _json_escape(match: re.Match[str]) -> str:
    return json.dumps(match.group())[1:-1]


def escape_unprintable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with control characters and lone surrogates escaped as JSON escapes them."""
    pattern = _UNPRINTABLE_BUT_NEWLINE if keep_newlines else _UNPRINTABLE
    return pattern.sub(_json_escape, text)


def _escape_for_console(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # Strings are written raw by the console renderer; anything else goes through repr(),
    # which escapes already.
    for key, value in list(event_dict.items()):
        if isinstance(value, str):
            event_dict[key] = escape_unprintable(value)
    return event_dict


def _scrubbed_traceback(redactor: SecretRedactor) -> Any:
    """The console renderer's exception formatter, with the traceback text scrubbed and
    its control characters (a hostile value in an exception message) escaped."""

    def formatter(sio: TextIO, exc_info: Any) -> None:
        buffer = io.StringIO()
        structlog.dev.plain_traceback(buffer, exc_info)
        sio.write(escape_unprintable(redactor.scrub(buffer.getvalue()), keep_newlines=True))

    return formatter


def configure_logging(
    level: str = "info",
    fmt: str = "auto",
    *,
    known_secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> None:
    """Configure structlog (and the stdlib loggers of our libraries) once, at start-up."""
    out = stream or sys.stderr
    use_json = fmt == "json" or (fmt == "auto" and not out.isatty())
    redactor = SecretRedactor(known_secrets)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redactor,
    ]
    renderer: list[Any]
    if use_json:
        renderer = [
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            _scrub_rendered(redactor),
            structlog.processors.JSONRenderer(),
        ]
    else:
        renderer = [
            _escape_for_console,
            structlog.dev.ConsoleRenderer(
                colors=out.isatty(), exception_formatter=_scrubbed_traceback(redactor)
            ),
        ]
    numeric = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[*shared, *renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    # Libraries (nio, aioimaplib, apscheduler) log through the stdlib: route them to the same
    # stream at warning and above, so they neither vanish nor flood, rendered (and scrubbed)
    # by the same processors as our own events.
    root = logging.getLogger()
    for previous in [h for h in root.handlers if getattr(h, "squidd_handler", False)]:
        root.removeHandler(previous)
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
        )
    )
    handler.squidd_handler = True  # type: ignore[attr-defined]  # marks ours for a re-configure
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
