"""What a chat command is: a name, one line of help beside it, and the coroutine that answers.

A command module defines one `ChatCommand` named `COMMAND`; the package's table lists them.
The answer is the reply text; a command never calls the model. What a command may use of the
running daemon is the `CommandHost` protocol, so a command is testable without a daemon.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from squidd.core.approvals import Approvals
from squidd.core.models import Inbound

if TYPE_CHECKING:  # the commands use it; it imports this package's parser
    from squidd.gateway.conversations import Conversations

__all__ = ["ChatCommand", "CommandCall", "CommandHost"]


class CommandHost(Protocol):
    """What the daemon offers the chat commands."""

    async def usage_today(self) -> Mapping[str, Any]: ...

    async def agent_figures(self) -> Mapping[str, Any]:
        """The agent answering: its name, usage today and own caps; {} with one agent."""
        ...

    def approvals(self) -> Approvals | None: ...

    def model_state(self) -> Mapping[str, Any]:
        """The model chain's state (`ProviderChain.snapshot`): the providers, the last answer."""
        ...

    @property
    def conversations(self) -> Conversations: ...


@dataclass(frozen=True, slots=True)
class CommandCall:
    """One use of a command: the message, the text after the command word, the daemon, and
    the table of commands (for `/help`)."""

    inbound: Inbound
    argument: str
    host: CommandHost
    commands: Sequence[ChatCommand]

    @property
    def conversation(self) -> str:
        """The conversation the message belongs to, as its channel names it."""
        return self.inbound.session_id


@dataclass(frozen=True, slots=True)
class ChatCommand:
    name: str
    """The word after the slash, lower case."""
    help: str
    """One line for `/help`: what the command does."""
    run: Callable[[CommandCall], Awaitable[str]]
