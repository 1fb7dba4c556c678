"""MemoryManager: what the model sees of the past on every turn.

It follows the memory design documents:

* a consolidation cursor per session: only messages after it count toward the threshold,
  and only they are summarised; the cursor survives restarts (no re-consolidation);
* two levels of memory: the global `MEMORY.md` (written only by `memory_write`) and a
  per-session summary (written only by consolidation);
* meta-consolidation: a summary grown past 600 words is re-summarised to about 8 sentences,
  keeping the long one when that LLM call fails (graceful degradation); with a
  `PromptBudget`, a summary past its share (`summary_tokens`) is re-summarised as well, so
  the summary a turn carries stays within a fixed size however old the session is;
* a warning in the system prompt one turn before consolidation, and a verbatim window of
  `keep_recent_ratio * consolidation_threshold` messages kept after consolidating.

Beside the seeds' message threshold, with a `PromptBudget` (core/budget.py) consolidation
also triggers when the window's estimated tokens exceed what history may use (the design
documents' TODO), keeping `keep_recent_ratio` of that in tokens; the warning then also
fires when one more turn like the last would cross it. The cursor means what it always
meant: the number of messages folded into the summary.

System prompt order: base prompt, `## Your Memory`, `## Conversation Summary`, warning.
A turn reads the session's window once (`load_window`) and hands that same window to
`finished_reply` and `build_messages`, so its cost is one read of the window.
The manager is pure logic: storage and the LLM are ports handed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import structlog

from squidd.core.budget import (
    PromptBudget,
    cap_text,
    fit_history,
    last_turn_tokens,
    newest_within,
)
from squidd.core.estimator import TokenEstimator
from squidd.core.models import (
    HistoryWindow,
    Message,
    SessionId,
    TextDelta,
    ToolCallsReady,
    Usage,
)
from squidd.core.ports import LLMPort, MemoryStore
from squidd.core.usage import UsageSink, record_usage

log = structlog.get_logger()

CONSOLIDATION_WARNING = (
    "\n\n[System: Conversation history will soon be summarized and condensed. "
    "Use the memory_write tool now to preserve anything critical before it happens.]\n"
)

_CONSOLIDATION_SYSTEM = (
    "You are a memory consolidation assistant. You condense a conversation into a factual "
    "summary that will replace it in the assistant's context. Keep names, dates, decisions, "
    "open tasks and preferences; drop small talk. Output only the summary text."
)

_CONSOLIDATION_PROMPT = (
    "Summarize the following conversation history into a concise memory entry. "
    "Focus on key facts, decisions, and context useful for future conversations. "
    "Do not include small talk or filler.\n\n"
    "Conversation history:\n{history}\n\n"
    "Provide a summary of a few sentences suitable for appending to a memory document."
)

_META_CONSOLIDATION_SYSTEM = (
    "You are a memory consolidation assistant. "
    "You are given an existing session summary that has grown too long. "
    "Compress it into a shorter summary that retains all facts, decisions, and context. "
    "Output only the summary text — no preamble, no commentary, no formatting."
)

_META_CONSOLIDATION_PROMPT = (
    "The following is a session summary that has grown too long and needs to be compressed.\n\n"
    "{summary}\n\n"
    "Rewrite this as a compact summary of approximately {sentences} sentences. "
    "Retain all facts, decisions, and context. Do not discard any information."
)

META_SUMMARY_WORD_LIMIT = 600
META_SUMMARY_SENTENCES = 8


def _turn_start(messages: Sequence[Message], index: int) -> int:
    """The index of the user message that begins the turn containing `messages[index]`.

    Splitting a conversation inside a turn would leave tool results without their call,
    which chat APIs reject; the verbatim window therefore always starts at a user message.
    """
    while index > 0 and messages[index].role != "user":
        index -= 1
    return index


def _drop_to_first_user(messages: list[Message]) -> list[Message]:
    for index, message in enumerate(messages):
        if message.role == "user":
            return messages[index:]
    return []


class MemoryManager:
    """Builds each turn's message list and folds old history into the session summary."""

    def __init__(
        self,
        storage: MemoryStore,
        llm: LLMPort | None = None,
        consolidation_threshold: int = 100,
        keep_recent_ratio: float = 0.2,
        usage: UsageSink | None = None,
        budget: PromptBudget | None = None,
        estimator: TokenEstimator | None = None,
    ) -> None:
        if consolidation_threshold <= 0:
            raise ValueError("consolidation_threshold must be > 0")
        if not 0 < keep_recent_ratio < 1:
            raise ValueError("keep_recent_ratio must be between 0 and 1 (exclusive)")
        self._storage = storage
        self._llm = llm
        self._usage = usage
        self._budget = budget
        self.estimator = estimator or TokenEstimator()
        self._keep_recent_ratio = keep_recent_ratio
        self._consolidation_threshold = consolidation_threshold
        self._keep_recent = max(1, int(consolidation_threshold * keep_recent_ratio))

    @property
    def budget(self) -> PromptBudget | None:
        return self._budget

    def use_window(self, context_window: int) -> None:
        """The model's window as learnt after start (a local server's served context): the
        budget's parts stay, its window changes."""
        if self._budget is not None and self._budget.context_window != context_window:
            self._budget = replace(self._budget, context_window=context_window)

    @property
    def keep_recent(self) -> int:
        return self._keep_recent

    async def load_window(self, session_id: SessionId) -> HistoryWindow:
        """The session's cursor and the messages after it: what one turn works from."""
        return await self._storage.load_window(session_id)

    async def load_texts(self, session_id: SessionId, memory_of: str | None) -> tuple[str, str]:
        """MEMORY.md (the shared one, or `memory_of`'s own) and the session's summary."""
        global_memory = await self._storage.load_global_memory(memory_of)
        return global_memory, await self._storage.load_session_summary(session_id)

    async def build_messages(
        self,
        session_id: SessionId,
        system_prompt: str,
        user_message: str,
        *,
        window: HistoryWindow | None = None,
        reserved_tokens: int = 0,
        extra_parts: Sequence[str] = (),
        tight: bool = False,
        memory_of: str | None = None,
        texts: tuple[str, str] | None = None,
    ) -> list[Message]:
        """[system + memory + summary + extra parts + warning] + history + the new message.

        `window` is the session's window when the turn already read it (else it is read).
        With a `PromptBudget`, the parts are capped, consolidation also triggers when the
        unconsolidated window's tokens exceed what history may use, and the history sent
        is the newest that fits; `reserved_tokens` (the tool schemas) count against it.
        `tight` (a retry after the provider said the context was too long) consolidates
        whatever it can and halves the budget. `memory_of` names the person whose own
        MEMORY.md the prompt holds (memory per person); None: the shared one. `texts` are
        that MEMORY.md and the session's summary when the turn already read them.
        """
        if window is None:
            window = await self.load_window(session_id)
        recent = window.messages
        if texts is None:
            texts = await self.load_texts(session_id, memory_of)
        global_memory, session_summary = texts

        def system_text(summary: str) -> str:
            return self._system(system_prompt, global_memory, summary, extra_parts)

        available = self._history_tokens(
            system_text(session_summary), user_message, reserved_tokens, tight
        )
        window_tokens = self.estimator.messages(recent)
        over_tokens = available is not None and window_tokens > available
        if (
            len(recent) > self._consolidation_threshold or over_tokens or tight
        ) and self._llm is not None:
            keep_tokens = None
            if available is not None:
                # A retry after an overflow keeps only the last turn verbatim.
                keep_tokens = 0 if tight else int(available * self._keep_recent_ratio)
            consolidated = await self._consolidate(session_id, window, keep_tokens=keep_tokens)
            if consolidated is not recent:
                recent = consolidated
                session_summary = await self._storage.load_session_summary(session_id)
                available = self._history_tokens(
                    system_text(session_summary), user_message, reserved_tokens, tight
                )
                window_tokens = self.estimator.messages(recent)

        full_system = system_text(session_summary)
        warn = len(recent) >= self._consolidation_threshold - 2
        if available is not None:
            # One more turn like the last one would cross the token trigger.
            warn = warn or window_tokens + last_turn_tokens(recent, self.estimator) > available
        if warn:
            full_system += CONSOLIDATION_WARNING

        history = _drop_to_first_user(recent)
        if available is not None:
            history = _drop_to_first_user(fit_history(history, available, self.estimator))
        return [
            Message(role="system", content=full_system),
            *history,
            Message(role="user", content=user_message),
        ]

    def _system(self, base: str, memory: str, summary: str, extra_parts: Sequence[str]) -> str:
        budget = self._budget
        text = base
        if memory.strip():
            memory = memory.strip()
            if budget is not None:
                memory = cap_text(memory, budget.memory_tokens, self.estimator)
            text += f"\n\n## Your Memory\n\n{memory}"
        if summary.strip():
            summary = summary.strip()
            if budget is not None:
                summary = cap_text(summary, budget.summary_tokens, self.estimator, keep_end=True)
            text += f"\n\n## Conversation Summary\n\n{summary}"
        extra = "\n\n".join(part.strip() for part in extra_parts if part.strip())
        if extra:
            if budget is not None:
                extra = cap_text(extra, budget.extra_tokens, self.estimator)
            text += f"\n\n{extra}"
        return text

    def _history_tokens(
        self, system: str, user_message: str, reserved: int, tight: bool
    ) -> int | None:
        """Tokens left for history under the budget; None without a budget."""
        if self._budget is None:
            return None
        total = self._budget.fit_tokens(tight=tight)
        fixed = self.estimator.messages(
            [Message(role="system", content=system), Message(role="user", content=user_message)]
        )
        return max(0, total - fixed - reserved)

    def finished_reply(self, window: HistoryWindow, turn: str) -> str | None:
        """The final reply of turn `turn` if the session's `window` already holds it whole.

        A crash after a turn was saved but before its reply was handed on makes the source
        deliver the message again; the stored answer is reused instead of asking the model
        a second time (and writing the exchange twice). Only the unconsolidated window is
        looked at: redeliveries come soon after the crash.
        """
        messages = window.messages
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.role == "user" and message.turn == turn:
                end = index + 1
                while end < len(messages) and messages[end].role != "user":
                    end += 1
                final = messages[end - 1]
                if end - 1 > index and final.role == "assistant" and not final.tool_calls:
                    return final.content or ""
                return None
        return None

    async def persist_turn(self, session_id: SessionId, messages: Sequence[Message]) -> None:
        """Append a finished turn (user message, tool traffic, reply) to the history."""
        await self._storage.append_messages(session_id, messages)

    async def _consolidate(
        self, session_id: SessionId, window: HistoryWindow, *, keep_tokens: int | None = None
    ) -> list[Message]:
        """Summarise `window.messages` except the recent ones; advance the cursor.

        The recent ones are `keep_recent` messages, or fewer when `keep_tokens` is given
        and they hold more tokens than that (`keep_recent_ratio` of the token trigger).
        Returns the messages to keep verbatim. On any failure the window stays as it was
        (the next turn tries again): nothing is lost.
        """
        messages = window.messages
        keep = self._keep_recent
        if keep_tokens is not None:
            keep = max(1, min(keep, newest_within(messages, keep_tokens, self.estimator)))
        keep = min(keep, len(messages)) or 1
        split = _turn_start(messages, max(0, len(messages) - keep))
        to_summarize, recent = messages[:split], messages[split:]
        if not to_summarize:
            return messages

        history_text = "".join(
            f"{m.role}: {m.content}\n"
            for m in to_summarize
            if m.role in ("user", "assistant") and m.content
        )
        new_cursor = window.cursor + len(to_summarize)
        if not history_text.strip():
            # Only tool traffic: nothing worth a summary, but no reason to re-read it either.
            await self._storage.save_consolidated_cursor(session_id, new_cursor)
            return recent

        summary = await self._call_llm(
            [
                Message(role="system", content=_CONSOLIDATION_SYSTEM),
                Message(role="user", content=_CONSOLIDATION_PROMPT.format(history=history_text)),
            ],
            session=session_id,
            purpose="consolidation",
        )
        if summary is None:
            return messages

        existing = await self._storage.load_session_summary(session_id)
        updated = f"{existing.strip()}\n\n{summary}" if existing.strip() else summary
        updated = await self._maybe_meta_consolidate(updated, session=session_id)
        # Summary first, cursor second: a crash in between re-summarises (duplicate text),
        # the other order could lose the summarised messages.
        await self._storage.save_session_summary(session_id, updated)
        await self._storage.save_consolidated_cursor(session_id, new_cursor)
        log.info(
            "history_consolidated",
            session=session_id,
            summarized=len(to_summarize),
            cursor=new_cursor,
            kept=len(recent),
        )
        return recent

    async def _call_llm(
        self, messages: list[Message], *, session: str = "", purpose: str = "consolidation"
    ) -> str | None:
        """The model's text answer to `messages`, or None on any failure or an empty answer.

        The call's reported usage goes to the ledger under `session` and `purpose`."""
        llm = self._llm
        if llm is None:
            return None
        chunks: list[str] = []
        try:
            async for event in llm.chat(messages, []):
                if isinstance(event, TextDelta):
                    chunks.append(event.text)
                elif isinstance(event, ToolCallsReady):
                    continue
                elif isinstance(event, Usage):
                    await record_usage(self._usage, session, purpose, event)
                else:  # StreamRestart: a fallback model starts over
                    chunks.clear()
        except Exception as exc:  # noqa: BLE001 - consolidation must never break a turn
            log.warning("consolidation_llm_failed", reason=f"{type(exc).__name__}: {exc}")
            return None
        result = "".join(chunks).strip()
        return result or None

    def _summary_too_long(self, summary: str) -> bool:
        """Past 600 words (the design's trigger), or past the summary's share of the prompt
        budget (`summary_tokens`) when that comes first: a summary the prompt would cut is
        compressed instead, so it never grows with the age of the conversation."""
        if len(summary.split()) > META_SUMMARY_WORD_LIMIT:
            return True
        cap = self._budget.summary_tokens if self._budget is not None else 0
        return cap > 0 and self.estimator.tokens(len(summary)) > cap

    async def _maybe_meta_consolidate(self, summary: str, *, session: str = "") -> str:
        """Compress a summary that is too long (`_summary_too_long`); keep it as it is if
        that fails."""
        if not self._summary_too_long(summary):
            return summary
        prompt = _META_CONSOLIDATION_PROMPT.format(
            summary=summary, sentences=META_SUMMARY_SENTENCES
        )
        result = await self._call_llm(
            [
                Message(role="system", content=_META_CONSOLIDATION_SYSTEM),
                Message(role="user", content=prompt),
            ],
            session=session,
            purpose="meta_consolidation",
        )
        if result is None:
            log.warning("meta_consolidation_skipped", words=len(summary.split()))
            return summary
        return result
