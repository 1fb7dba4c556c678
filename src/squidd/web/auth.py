"""Dashboard logins: an API key in a login form buys a random session token, kept in an
HttpOnly, SameSite=Strict cookie; each session has its own CSRF token, which every form
carries and every POST must send back. The login form has its own CSRF token (a cookie
set with the form, sent back in it). Sessions live in memory: a restart logs out.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

SESSION_COOKIE = "squidd_session"
LOGIN_COOKIE = "squidd_login"
SESSION_S = 12 * 3600.0
MAX_SESSIONS = 100


@dataclass(frozen=True, slots=True)
class Login:
    csrf: str
    expires: float
    key_id: str = ""
    """The id of the API key logged in with: the browser chat's requests count as its."""


class Logins:
    def __init__(self, *, now: Callable[[], float] = time.monotonic) -> None:
        self._sessions: dict[str, Login] = {}
        self._now = now

    def start(self, key_id: str = "") -> tuple[str, Login]:
        """A new session: its cookie value and its CSRF token."""
        now = self._now()
        self._sessions = {t: s for t, s in self._sessions.items() if s.expires > now}
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))
        token = secrets.token_urlsafe(32)
        login = Login(secrets.token_urlsafe(24), now + SESSION_S, key_id)
        self._sessions[token] = login
        return token, login

    def get(self, token: str | None) -> Login | None:
        if not token:
            return None
        login = self._sessions.get(token)
        if login is None or login.expires <= self._now():
            return None
        return login

    def end(self, token: str | None) -> None:
        if token:
            self._sessions.pop(token, None)


def same(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a sent token with the expected one."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def new_token() -> str:
    return secrets.token_urlsafe(24)
