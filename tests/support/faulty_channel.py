"""A spool channel whose `send` raises ValueError for chosen messages: poison for the router.

Run beside the configured channels as `tests.support.faulty_channel:create_channel` (the
`channel` of `DaemonProcess` or `SpoolDaemon`). While
`<data dir>/spool/fault` exists, a reply to a message whose id is a line of that file fails
with a ValueError (a defect, not a passing failure); removing the file removes the fault.
While `spool/crash` lists a message's id, sending its reply ends the whole process at once
(`os._exit`, as a crash in a C library would). Every send try is recorded as a file in
`spool/tries/` (`<id>.<random>`), so a test counts the tries across daemon processes.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import anyio

from squidd.config import Settings
from squidd.core.models import Outbound
from tests.support.spool_channel import SpoolChannel


class FaultyChannel(SpoolChannel):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._fault = anyio.Path(root / "fault")
        self._tries = anyio.Path(root / "tries")
        self._crash = anyio.Path(root / "crash")

    async def send(self, outbound: Outbound) -> None:
        source = outbound.in_reply_to.source_id if outbound.in_reply_to else "scheduled"
        await self._tries.mkdir(parents=True, exist_ok=True)
        await (self._tries / f"{source}.{uuid.uuid4().hex[:8]}").touch()
        if source in await _listed(self._crash):
            os._exit(70)
        if source in await _listed(self._fault):
            raise ValueError(f"cannot encode the reply to {source}")
        await super().send(outbound)


async def _listed(path: anyio.Path) -> list[str]:
    try:
        return (await path.read_text()).split()
    except FileNotFoundError:
        return []


def create_channel(settings: Settings) -> FaultyChannel:
    return FaultyChannel(settings.storage.data_dir / "spool")
