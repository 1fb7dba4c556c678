"""The `[memory.recall]` section: hybrid recall over the history, summaries and MEMORY.md.

The embeddings model is named like a chain entry, `PROVIDER/MODEL`, of a provider in
`[[llm.providers]]` (or "default" for the one `[llm]` endpoint): its base URL and first
key are used for `POST /v1/embeddings`. Empty: recall is keyword-only (the `recall` tool
still answers from the keyword index).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from squidd.config._base import Section
from squidd.config.providers import split_entry

__all__ = ["MemorySettings", "RecallSettings"]


class RecallSettings(Section):
    embeddings: str = ""
    """The embeddings model as `PROVIDER/MODEL` (e.g. `local/nomic-embed-text`); empty:
    keyword recall only."""
    auto: bool = False
    """Before each turn, add the few most relevant earlier snippets (after the stable prompt
    prefix, within `auto_tokens`)."""
    auto_tokens: int = Field(default=300, ge=20, le=4000)
    """The token budget of the automatic step's snippets."""
    auto_snippets: int = Field(default=3, ge=1, le=20)
    """At most this many snippets in the automatic step."""
    tool_tokens: int = Field(default=1500, ge=50, le=20_000)
    """The token budget of one `recall` tool answer."""
    batch: int = Field(default=64, ge=1, le=2048)
    """Texts per `/v1/embeddings` request while indexing."""
    every_s: float = Field(default=5.0, gt=0, le=3600)
    """Seconds between the indexer's looks for new messages."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Seconds one embeddings request may take."""

    @field_validator("embeddings")
    @classmethod
    def _entry(cls, value: str) -> str:
        value = value.strip()
        if value and "/" not in value.strip("/"):
            # the providers are known only to the whole settings, which names them
            return value
        if value:
            split_entry(value)
        return value


class MemorySettings(Section):
    recall: RecallSettings = Field(default_factory=RecallSettings)
