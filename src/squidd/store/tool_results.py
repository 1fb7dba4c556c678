"""Full texts of tool results too long for the history, kept under the data dir.

A result longer than `tools.max_result_chars` enters the history cut; its whole text is
written here first, as `<data dir>/tool-results/<session>-<call id>.txt` (atomically,
owner-only), and the cut text names that file so the model can page through it with
`read_file` (`offset`/`limit` in characters). The model sees the name `tool-results/<file>`;
`read_file` maps that prefix to this directory, read-only.

Files are kept `tools.result_retention_days` after they were written; `sweep` removes older
ones (the daemon calls it at start and every hour). A note in an old history that names a
swept file then reads as a missing file, which `read_file` already reports.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import structlog

from squidd.fs import atomic_write_text, safe_name

PREFIX = "tool-results"

log = structlog.get_logger()


def _sweep(directory: Path, older_than: float) -> int:
    removed = 0
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return 0
    for path in entries:
        try:
            if path.suffix == ".txt" and path.stat().st_mtime < older_than:
                path.unlink()
                removed += 1
        except FileNotFoundError:  # removed by someone else meanwhile: nothing to do
            continue
    return removed


class ToolResultFiles:
    """A `ResultStore` for the agent loop: saves a text, returns the name to read it by."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / PREFIX

    async def save(self, session: str, call_id: str, text: str) -> str:
        # Both ids through safe_name: a bare character substitution made `a.b` and `a_b`
        # the same file, so one call's full text could replace another's.
        name = f"{safe_name(session)}-{safe_name(call_id)}.txt"
        path = self.directory / name
        await anyio.to_thread.run_sync(atomic_write_text, path, text)
        return f"{PREFIX}/{name}"

    async def sweep(self, now: float, keep_s: float) -> int:
        """Remove saved results last written before `now - keep_s` (epoch seconds)."""
        removed = await anyio.to_thread.run_sync(_sweep, self.directory, now - keep_s)
        if removed:
            log.info("tool_results_swept", removed=removed, keep_days=round(keep_s / 86400, 2))
        return removed
