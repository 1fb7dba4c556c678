"""`squidd doctor`'s line for hybrid recall: the `[memory.recall] embeddings` model asked to
embed one short text, as the daemon's indexer will. Without it the indexer retries in the
background and recall quietly stays keyword-only, so a wrong model name or a provider that
serves no `/v1/embeddings` is a ✗ here rather than a `recall_index_retry` in the log."""

from __future__ import annotations

from squidd.config import Settings
from squidd.errors import ConfigError, LLMError
from squidd.llm.embeddings import embeddings_client
from squidd.ops.doctor import Check

__all__ = ["recall_checks"]

FIX = (
    "check memory.recall.embeddings (PROVIDER/MODEL): that provider must serve the model "
    "at POST <base_url>/v1/embeddings, and be up"
)


async def recall_checks(settings: Settings, *, call: bool) -> list[Check]:
    """One line when an embeddings model is named; none without (keyword recall only)."""
    entry = settings.memory.recall.embeddings
    if not entry:
        return []
    name = f"recall embeddings {entry}"
    if not call:
        return [Check.skip(name, "not asked (--no-llm-call)")]
    try:
        client = embeddings_client(settings)
    except ConfigError as exc:
        return [Check.fail(name, "; ".join(exc.problems), FIX)]
    if client is None:
        return []
    try:
        [vector] = await client.embed(["squidd doctor"])
    except LLMError as exc:
        return [Check.fail(name, str(exc), FIX)]
    finally:
        await client.aclose()
    return [Check.ok(name, f"answers ({len(vector)} dimensions)")]
