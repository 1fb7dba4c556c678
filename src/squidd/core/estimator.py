"""Token estimates: cheap (characters per token), calibrated per model from what the
provider reports.

Counting tokens exactly would need each model's tokenizer; squidd divides characters by a
ratio instead, and learns the ratio of each model from the provider's own `prompt_tokens`
of earlier calls (an exponential average, weight 1/2 for each new call), so the estimate
follows the provider within a few calls and cannot drift far: an estimator that undercounts
is how a context overflows while consolidation never runs. Before any report the ratio is
3.5 characters per token, slightly pessimistic for English text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from squidd.core.models import Message, ToolDefinition

DEFAULT_CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD_CHARS = 16  # role, separators: about four tokens per message
_WEIGHT = 0.5
_MIN_RATIO, _MAX_RATIO = 0.5, 12.0


def message_chars(message: Message) -> int:
    chars = MESSAGE_OVERHEAD_CHARS + len(message.content or "")
    for call in message.tool_calls:
        chars += len(call.name) + len(call.arguments) + MESSAGE_OVERHEAD_CHARS
    return chars


def messages_chars(messages: Iterable[Message]) -> int:
    return sum(message_chars(m) for m in messages)


def tools_chars(tools: Sequence[ToolDefinition]) -> int:
    return sum(
        len(t.name) + len(t.description) + len(json.dumps(dict(t.parameters))) + 24 for t in tools
    )


class TokenEstimator:
    """Characters-per-token ratios by model, learnt from reported usage."""

    def __init__(self, default_ratio: float = DEFAULT_CHARS_PER_TOKEN) -> None:
        self._default = default_ratio
        self._ratios: dict[str, float] = {}
        self._current: str | None = None

    def ratio(self, model: str | None = None) -> float:
        name = model if model is not None else self._current
        if name is None:
            return self._default
        return self._ratios.get(name, self._default)

    def tokens(self, chars: int, model: str | None = None) -> int:
        return int(chars / self.ratio(model)) + 1

    def messages(self, messages: Iterable[Message], model: str | None = None) -> int:
        return self.tokens(messages_chars(messages), model)

    def observe(self, model: str, chars: int, prompt_tokens: int) -> None:
        """A call of `chars` request characters was counted `prompt_tokens` by `model`."""
        if prompt_tokens <= 0 or chars <= 0:
            return
        seen = min(_MAX_RATIO, max(_MIN_RATIO, chars / prompt_tokens))
        old = self._ratios.get(model)
        self._ratios[model] = seen if old is None else old + _WEIGHT * (seen - old)
        self._current = model

    def overflowed(self, chars: int, context_window: int, model: str | None = None) -> None:
        """The provider refused `chars` characters as longer than its window: the ratio
        was too generous; make it at least as strict as that refusal proves."""
        name = model if model is not None else (self._current or "")
        bound = chars / (context_window * 1.05)
        self._ratios[name] = min(self.ratio(name), max(_MIN_RATIO, bound))
        self._current = name
