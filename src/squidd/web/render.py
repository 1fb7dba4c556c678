"""The dashboard's pages from Jinja2 templates (web/pages/), escaped by default.

Every template is autoescaped (`autoescape=True` for every name, not per call site), and
every `{{ value }}` passes through `shown` first: a lone surrogate (which no UTF-8 page can
carry) becomes U+FFFD and a bidirectional control (an RTL override that would turn
"txt.exe" around) is shown as its code point, so hostile text reads as what it is. No
template uses `|safe` or builds markup in Python: charts are SVG written by templates from
numbers. The environment is made once, on first use, never at import time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

CSP = "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make POSTs say Origin: null
    "Cache-Control": "no-store",
}
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SURROGATE = re.compile("[\ud800-\udfff]")


def shown(text: str) -> str:
    """`text` as a page may show it: no lone surrogate, no invisible direction change."""
    text = SURROGATE.sub("\ufffd", text)
    return BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def words(value: object) -> str:
    """A snapshot value as words: a mapping as "key: value; ...", a list joined by commas."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {words(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(words(v) for v in value)
    return str(value)


def _finalize(value: object) -> object:
    # A macro's output is the templates' own markup, its values already through here.
    if isinstance(value, str) and not isinstance(value, Markup):
        return shown(value)
    return value


@functools.cache
def environment() -> Environment:
    return Environment(
        loader=PackageLoader("squidd.web", "pages"),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )


def render_text(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def render(name: str, status: int = 200, **context: Any) -> web.Response:
    """The page `name` with `context`, as a response with the dashboard's headers."""
    body = render_text(name, **context).encode("utf-8", "replace")
    return web.Response(
        body=body,
        status=status,
        content_type="text/html",
        charset="utf-8",
        headers=HEADERS,
    )


@functools.cache
def static_file(name: str) -> bytes:
    """A file of web/static/ (the stylesheet, the chat's script), read from the package once
    (the dashboard reads them when it is built, before the event loop serves a page)."""
    return resources.files("squidd.web").joinpath("static", name).read_bytes()


def static(name: str, content_type: str) -> web.Response:
    headers = {**HEADERS, "Cache-Control": "no-cache"}
    return web.Response(
        body=static_file(name), content_type=content_type, charset="utf-8", headers=headers
    )
