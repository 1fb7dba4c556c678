"""Conversations as the chat commands change them: the session a turn runs in (`/new`),
the model it asks (`/model`), and the running turn `/stop` cancels.

A channel names a message's conversation (`Inbound.session_id`: a room, a sender, the
terminal session); the turn runs in that conversation's current session
(store/conversations.py: `/new` moves it to a fresh one, the old one stays on disk). `/stop`
cannot wait in its session's line behind the turn it stops, so `StopEarly` (a stage of the
pipeline, gateway/pipeline.py, before any that holds a message) sees it as it arrives and
cancels the running turn there; the `/stop` message itself is then answered in
order, like every command. A cancelled turn leaves nothing half-done: a tool call in flight
is recorded as interrupted in the turn's journal (core/turns.py), and the user message and a
note that it was stopped enter the history, so the next turn knows.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import structlog

from squidd.core.command_words import STOP, parse
from squidd.core.models import Inbound, InboundKind, SessionId
from squidd.core.ports import HandOn, Later, LLMPort
from squidd.gateway.runtime import Runtime
from squidd.store.conversations import ConversationsFile

__all__ = ["Conversations", "StopEarly"]

log = structlog.get_logger()

STOPPED = "Stopped: I cancelled the work on this message, as you asked with /stop."


class Conversations:
    """The current session and model of each conversation; its running turn, stoppable."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self.file = ConversationsFile(runtime.settings.storage.data_dir)
        self._running: dict[str, anyio.CancelScope] = {}
        self._stopped: set[str] = set()
        self._ended: dict[str, anyio.Event] = {}

    def for_agent(self, runtime: Runtime) -> Conversations:
        """This object for another agent's turns: its chain for `/model`, the same sessions,
        running turns and `/stop` (a conversation belongs to one agent)."""
        view = copy.copy(self)
        view._runtime = runtime
        return view

    @property
    def models(self) -> list[str]:
        """The configured models a person may choose from."""
        return list(self._runtime.llm.models)

    async def session(self, conversation: str) -> SessionId:
        return await self.file.session(conversation)

    async def model(self, conversation: str) -> str:
        """The conversation's model: its strict choice, else the chain's head."""
        chosen = await self.file.model(conversation)
        return chosen if chosen in self.models else self.models[0]

    async def chose(self, conversation: str) -> str | None:
        """The model the conversation chose (strict), None while it follows the chain."""
        chosen = await self.file.model(conversation)
        return chosen if chosen in self.models else None

    async def llm(self, conversation: str) -> LLMPort | None:
        """The client for the conversation's chosen model, asking only that model (no
        silent switch to another); None: the configured chain."""
        chosen = await self.chose(conversation)
        if chosen is None:
            return None
        return self._runtime.llm.restricted_to(chosen)

    def running(self, conversation: str) -> bool:
        return conversation in self._running

    @asynccontextmanager
    async def turn(self, conversation: str) -> AsyncIterator[anyio.CancelScope]:
        """A cancel scope `/stop` cancels while the conversation's turn runs in it."""
        with anyio.CancelScope() as scope:
            self._running[conversation] = scope
            try:
                yield scope
            finally:
                if self._running.get(conversation) is scope:
                    del self._running[conversation]
                    ended = self._ended.pop(conversation, None)
                    if ended is not None:
                        ended.set()

    async def idle(self, conversation: str) -> None:
        """Return once no turn of the conversation runs."""
        while conversation in self._running:
            await self._ended.setdefault(conversation, anyio.Event()).wait()

    def stop(self, conversation: str) -> bool:
        """Cancel the conversation's running turn; False when none runs."""
        scope = self._running.get(conversation)
        if scope is None:
            return False
        scope.cancel()
        self._stopped.add(conversation)
        log.info("turn_stop_requested", session=conversation)
        return True

    def took_stop(self, conversation: str) -> bool:
        """Whether a `/stop` of this conversation cancelled a turn since last asked."""
        if conversation in self._stopped:
            self._stopped.discard(conversation)
            return True
        return False


def is_stop(inbound: Inbound) -> bool:
    if inbound.kind is not InboundKind.MESSAGE:
        return False
    parsed = parse(inbound.command or inbound.text)
    return parsed is not None and parsed[0] == STOP


class StopEarly:
    """The pipeline's stage that cancels a conversation's running turn as soon as its `/stop`
    arrives (before it waits in line, or in a burst), then hands every message on."""

    def __init__(self, conversations: Conversations) -> None:
        self._conversations = conversations

    async def take(self, message: Inbound, then: HandOn, later: Later) -> None:
        if is_stop(message):
            self._conversations.stop(message.session_id)
        await then(message)
