"""Hybrid recall's pure part: what a snippet is, how two rankings are fused, how the answer
is cut to a token budget.

The keyword index (every word must appear) and the vector index (nearest in meaning) each
rank what they found; reciprocal rank fusion adds `1 / (60 + rank)` for every ranking a
snippet is in, so one found by both comes first, and neither side's scores need to be
comparable. The fused list is cut to a token budget (about four characters a token, the
estimator's rule of thumb), each snippet with its date and conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Embedder", "Snippet", "fuse", "render", "within_budget"]

RRF_K = 60
_CHARS_PER_TOKEN = 4
_SNIPPET_CHARS = 400


class Embedder(Protocol):
    """Texts to vectors (llm/embeddings.py); `model` names what made them."""

    model: str

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class Snippet:
    """One remembered piece: where it is (`source`, `session`, `index`) and what it says."""

    source: str
    """"history", "summary" or "memory"."""
    session: str
    index: int
    text: str
    ts: str | None = None
    role: str = ""

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.source, self.session, self.index)


def fuse(rankings: Sequence[Sequence[Snippet]], k: int = RRF_K) -> list[Snippet]:
    """Reciprocal rank fusion of best-first rankings; the first text seen of a key is kept
    (the vector side's whole message beats the keyword side's window when listed first)."""
    scores: dict[tuple[str, str, int], float] = {}
    first: dict[tuple[str, str, int], Snippet] = {}
    for ranking in rankings:
        for rank, snippet in enumerate(ranking):
            scores[snippet.key] = scores.get(snippet.key, 0.0) + 1.0 / (k + rank + 1)
            first.setdefault(snippet.key, snippet)
    order = sorted(scores, key=lambda key: (-scores[key], key))
    return [first[key] for key in order]


def render(snippet: Snippet) -> str:
    """One line: `[date · conversation] role: text`, the text cut to a few sentences."""
    text = " ".join(snippet.text.split())
    if len(text) > _SNIPPET_CHARS:
        text = text[: _SNIPPET_CHARS - 1] + "…"
    when = (snippet.ts or "")[:10] or "undated"
    where = "memory" if snippet.source == "memory" else snippet.session
    if snippet.source == "summary":
        where += " (summary)"
    role = f"{snippet.role}: " if snippet.role and snippet.source == "history" else ""
    return f"[{when} · {where}] {role}{text}"


def tokens_of(text: str) -> int:
    return (len(text) + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN


def within_budget(snippets: Sequence[Snippet], tokens: int, most: int | None = None) -> list[str]:
    """The rendered snippets, best first, while their total stays within `tokens`."""
    lines: list[str] = []
    used = 0
    for snippet in snippets:
        if most is not None and len(lines) >= most:
            break
        line = render(snippet)
        cost = tokens_of(line) + 1  # the line break
        if used + cost > tokens:
            continue  # a shorter one further down may still fit
        lines.append(line)
        used += cost
    return lines
