"""Full texts of tool results too long for the history, kept under the data dir.

A result longer than `tools.max_result_chars` enters the history cut; its whole text is
written here first, as `<data dir>/tool-results/<session>-<call id>.txt` (atomically,
owner-only), and the cut text names that file so the model can page through it with
`read_file` (`offset`/`limit` in characters). The model sees the name `tool-results/<file>`;
`read_file` maps that prefix to this directory, read-only.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from squidd.fs import atomic_write_text, safe_name

PREFIX = "tool-results"


class ToolResultFiles:
    """A `ResultStore` for the agent loop: saves a text, returns the name to read it by."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / PREFIX

    async def save(self, session: str, call_id: str, text: str) -> str:
        # Both ids through safe_name: a bare character substitution made `a.b` and `a_b`
        # the same file, so one call's full text could replace another's.
        name = f"{safe_name(session)}-{safe_name(call_id)}.txt"
        path = self.directory / name
        await anyio.Path(self.directory).mkdir(parents=True, exist_ok=True, mode=0o700)
        await anyio.to_thread.run_sync(atomic_write_text, path, text)
        return f"{PREFIX}/{name}"
