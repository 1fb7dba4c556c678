"""The dashboard's audit page: whether the hash chain of the audit log holds, and its
newest entries.

Checking the chain reads the whole log, so it runs in a worker thread, on this page only
(the overview never reads the log), and never on the event loop.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from squidd.core.audit import ChainBroken
from squidd.errors import StorageError
from squidd.store.audit import AuditFile

NEWEST = 50


def _read(data_dir: Path) -> tuple[str, list[dict[str, object]]]:
    audit = AuditFile(data_dir)
    try:
        count, last = audit.verify()
        status = f"the chain holds: {count} entries, last hash {last[:16]}"
    except ChainBroken as exc:
        status = f"the chain is BROKEN at line {exc.line}: {exc.reason}"
    except StorageError as exc:
        status = f"the audit log cannot be read: {exc}"
    newest: list[dict[str, object]] = []
    for line in audit.lines()[-NEWEST:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            newest.append(record)
    return status, newest[::-1]


async def audit_status(data_dir: Path) -> tuple[str, list[dict[str, object]]]:
    """(the chain's status in words, the newest entries first), read off the event loop."""
    return await anyio.to_thread.run_sync(_read, data_dir)
