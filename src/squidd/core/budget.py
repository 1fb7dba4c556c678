"""The prompt's token budget: how big each part may be, and how history is made to fit.

`PromptBudget` is `agents.context_budget` of `llm.context_window` (a fraction, or a token
count). The system prompt's parts have their own caps (MEMORY.md, the session summary, and
extra parts such as a skills index); what is left, after the tool schemas and the new user
message, is for history. History that does not fit is made to fit for this request only,
in this order: older tool results shrink to a stub first (the newest turn keeps its own),
then the oldest whole turns are left out (always at a user message, so no tool result loses
its call). The stored history is never changed here: consolidation (core/memory.py, on the
seeds' cursor) is what folds old messages into the summary, and it is triggered on tokens
as well as on the message threshold, so trimming is the exception, not the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from squidd.core.estimator import TokenEstimator
from squidd.core.models import Message

SHRUNK_RESULT_CHARS = 300
HEADROOM = 0.05
_CUT_NOTE = "\n[cut to fit the prompt budget]"
_CUT_HEAD_NOTE = "[older part left out to fit the prompt budget]\n"


@dataclass(frozen=True, slots=True)
class PromptBudget:
    context_window: int
    context_budget: float = 0.75
    memory_tokens: int = 6_000
    summary_tokens: int = 500
    extra_tokens: int = 2_000

    @property
    def tokens(self) -> int:
        """The most tokens one request's prompt may hold (schemas included)."""
        if self.context_budget <= 1:
            return int(self.context_window * self.context_budget)
        return min(int(self.context_budget), self.context_window)

    def fit_tokens(self, *, tight: bool = False) -> int:
        """What assembly aims at: the budget less 5% headroom for the estimate's error
        (halved for a retry after the provider said the context was too long)."""
        aim = int(self.tokens * (1 - HEADROOM))
        return aim // 2 if tight else aim


def cap_text(
    text: str, max_tokens: int, estimator: TokenEstimator, *, keep_end: bool = False
) -> str:
    """`text` cut to about `max_tokens` (0: no cap), with a note saying so.

    `keep_end` keeps the text's end instead of its start: for a summary, whose newest
    consolidation is its last part.
    """
    if max_tokens <= 0 or estimator.tokens(len(text)) <= max_tokens:
        return text
    note = _CUT_HEAD_NOTE if keep_end else _CUT_NOTE
    keep = max(0, int(max_tokens * estimator.ratio()) - len(note))
    if keep_end:
        return note + (text[len(text) - keep :] if keep else "")
    return text[:keep] + note


def _turn_starts(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "user"] or [0]


def shrink_tool_results(messages: Sequence[Message], before: int) -> list[Message]:
    """Tool results before index `before` cut to a stub that still names a saved file."""
    shrunk: list[Message] = []
    for index, message in enumerate(messages):
        content = message.content or ""
        if index >= before or message.role != "tool" or len(content) <= SHRUNK_RESULT_CHARS:
            shrunk.append(message)
            continue
        saved = next(
            (line for line in reversed(content.splitlines()) if "tool-results/" in line), ""
        )
        stub = (
            f"{content[:SHRUNK_RESULT_CHARS]}\n[older tool result shortened to save context: "
            f"{len(content)} characters in all]"
        )
        shrunk.append(replace(message, content=f"{stub}\n{saved}" if saved else stub))
    return shrunk


def fit_history(
    messages: Sequence[Message], available: int, estimator: TokenEstimator
) -> list[Message]:
    """The newest history that fits in `available` tokens (see the module docstring)."""
    result = list(messages)
    if estimator.messages(result) <= available:
        return result
    starts = _turn_starts(result)
    result = shrink_tool_results(result, starts[-1])
    while estimator.messages(result) > available and len(starts) > 1:
        cut = starts[1] - starts[0]
        result = result[cut:]
        starts = [s - cut for s in starts[1:]]
    if estimator.messages(result) > available:
        result = shrink_tool_results(result, len(result))
    return result


def newest_within(messages: Sequence[Message], tokens: int, estimator: TokenEstimator) -> int:
    """How many of the newest messages fit together in `tokens`."""
    used = 0
    count = 0
    for message in reversed(messages):
        used += estimator.messages([message])
        if used > tokens:
            break
        count += 1
    return count


def last_turn_tokens(messages: Sequence[Message], estimator: TokenEstimator) -> int:
    """Tokens of the newest whole turn: about what one more turn will add."""
    return estimator.messages(messages[_turn_starts(messages)[-1] :]) if messages else 0


def fit_request(
    context: list[Message],
    steps: list[Message],
    reserved: int,
    budget: PromptBudget | None,
    estimator: TokenEstimator,
    *,
    tight: bool,
) -> list[Message]:
    """One round's request (the `context`, then this turn's `steps` so far) within the
    budget: first the turn's older tool results shrink (the newest round stays whole), then
    older history makes room. `reserved` is the tokens of the tool schemas."""
    if budget is None or not steps:
        return [*context, *steps]
    limit = budget.fit_tokens(tight=tight)
    if estimator.messages([*context, *steps]) + reserved <= limit:
        return [*context, *steps]
    last_round = max(i for i, m in enumerate(steps) if m.role == "assistant")
    steps = shrink_tool_results(steps, last_round)
    if estimator.messages([*context, *steps]) + reserved <= limit:
        return [*context, *steps]
    system, history, user = context[0], context[1:-1], context[-1]
    available = limit - reserved - estimator.messages([system, user, *steps])
    history = fit_history(history, max(0, available), estimator)
    while history and history[0].role != "user":
        history = history[1:]
    return [system, *history, user, *steps]
