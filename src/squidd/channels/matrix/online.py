"""What exists only while the channel is connected, for the parts made once per run.

The channel's parts that outlive a reconnect (the typing notices, the status reactions,
the verification flows, the thread stage, `send` and the streamed answers) are built once,
with everything they need; what only a connection has -- the logged-in client, its
policy, its trust pass and, once made sure of, the bot's signing identity -- they ask for
through a `Link`. `Online` is the channel's: it answers for the connection being served
(`serving`), and None (no trust pass) between connections.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from nio import AsyncClient

from squidd.channels.matrix.policy import Policy

__all__ = ["Identity", "Link", "Online", "Session"]


class Identity(Protocol):
    """The bot's cross-signing identity, as far as verification needs it."""

    def own_master_key(self) -> str | None: ...

    async def master_key_of(self, user_id: str) -> str | None: ...

    async def verified(self, user_id: str, master_key: str) -> None: ...


class Session(Protocol):
    """One connection, as the parts of the run see it (a `connection.Connection`)."""

    @property
    def client(self) -> AsyncClient: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def signing(self) -> Identity | None: ...

    def apply_trust(self) -> None: ...


class Link(Protocol):
    """What a part asks of the connection of the moment; None between connections."""

    @property
    def client(self) -> AsyncClient | None: ...

    @property
    def policy(self) -> Policy | None: ...

    @property
    def identity(self) -> Identity | None: ...

    def apply_trust(self) -> None:
        """Mark every known device as the trust policy says (before an event is encrypted)."""


class Online:
    """The `Link` to the connection being served (`serving`), if any."""

    def __init__(self) -> None:
        self._session: Session | None = None

    @contextmanager
    def serving(self, session: Session) -> Iterator[None]:
        """`session` is the connection of the moment while the block runs."""
        self._session = session
        try:
            yield
        finally:
            self._session = None

    @property
    def client(self) -> AsyncClient | None:
        return self._session.client if self._session is not None else None

    @property
    def policy(self) -> Policy | None:
        return self._session.policy if self._session is not None else None

    @property
    def identity(self) -> Identity | None:
        return self._session.signing if self._session is not None else None

    def apply_trust(self) -> None:
        if self._session is not None:
            self._session.apply_trust()
