"""What the LLM port streams for one model call: text in order, the tool calls asked for
(`ToolCall`, as the history keeps them too), a restart (a fallback model starts over) and
the provider's usage count.

Kept apart from `core/models.py` (which imports them, so either name works): the stream's
vocabulary is the LLM port's own.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LLMEvent", "StreamRestart", "TextDelta", "ToolCall", "ToolCallsReady", "Usage"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by the model; `arguments` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the assistant's reply text, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallsReady:
    """The response ended asking for these tool calls (already assembled from deltas)."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class StreamRestart:
    """Text streamed so far for this response is void: a fallback model starts over.

    Consumers drop what they buffered since the response began, so no text reaches the
    user twice.
    """

    reason: str


@dataclass(frozen=True, slots=True)
class Usage:
    """What the provider counted for one model call, sent at the end of its stream.

    Providers that report nothing simply never send it; consumers then keep their estimate.
    `cached_tokens` is the part of `prompt_tokens` served from the provider's prompt cache.
    """

    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    provider: str = ""
    """The provider that answered (the chain's name for it); "" where none is named."""


LLMEvent = TextDelta | ToolCallsReady | StreamRestart | Usage
