"""How much memory the Matrix channel needs to receive large files: streamed, not held.

A real Synapse on 127.0.0.1 (the test suite's pinned install) holds ten 20 MB files that a
person uploaded (streamed from disk, before the measurement). The bot's Matrix channel,
with the media store under a temporary data dir, is connected and idle; its resident set
(VmRSS from /proc, this process) is read, then the person posts the ten `m.file` events in
a row and a sampler reads VmRSS every 5 ms until all ten files are stored. The peak must
stay within 30 MiB of the idle figure: each file goes to disk in 64 KiB chunks.

    python bench/bench_media_rss.py [--files 10] [--mb 20]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import anyio
from nio import AsyncClient
from tests.servers.synapse.server import SynapseServer, default_data_root

from squidd.channels.matrix import MatrixChannel
from squidd.config.matrix import MatrixSettings
from squidd.core.models import Inbound
from squidd.core.ports import ChannelState
from squidd.store.media import MediaStore

TARGET_KIB = 30 * 1024


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Inbox:
    def __init__(self, expected: int) -> None:
        self.received: list[Inbound] = []
        self.ready = False
        self.expected = expected
        self.done = anyio.Event()

    async def put(self, message: Inbound) -> None:
        self.received.append(message)
        if len(self.received) >= self.expected:
            self.done.set()

    def report(self, state: ChannelState, detail: str = "") -> None:
        self.ready = self.ready or state == ChannelState.CONNECTED


async def upload(url: str, token: str, path: Path, size: int) -> str:
    async with aiohttp.ClientSession() as session:
        with path.open("rb") as handle:
            async with session.post(
                f"{url}/_matrix/media/v3/upload?filename=blob.bin",
                data=handle,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/octet-stream",
                    "Content-Length": str(size),
                },
            ) as response:
                body: dict[str, Any] = await response.json()
                if response.status != 200:
                    raise RuntimeError(f"upload failed: {response.status} {body}")
                return str(body["content_uri"])


async def main(files: int, mb: int) -> int:
    root = Path(tempfile.mkdtemp(prefix="squidd-bench-media-", dir=default_data_root()))
    server = SynapseServer(root / "hs")
    server.start()
    try:
        bot = server.register("squidd-bench", password=secrets.token_hex(12))
        human = server.register("alice-bench", password=secrets.token_hex(12))
        blob = root / "blob.bin"
        with blob.open("wb") as handle:
            for _ in range(mb):
                handle.write(os.urandom(1024 * 1024))
        size = blob.stat().st_size
        uris = [await upload(server.url, human.access_token, blob, size) for _ in range(files)]
        alice = AsyncClient(server.url, human.user_id, device_id=human.device_id)
        alice.restore_login(human.user_id, human.device_id, human.access_token)
        created = await alice.room_create(invite=[bot.user_id], is_direct=True)
        room = created.room_id  # type: ignore[union-attr]

        data = root / "data"
        data.mkdir()
        settings = MatrixSettings(
            enabled=True,
            homeserver=server.url,
            user_id=bot.user_id,
            password=bot.password,
            allowed_users=[human.user_id],
            sync_timeout_s=2.0,
        )
        store = MediaStore(data, lifetime_s=3600)
        channel = MatrixChannel(settings, data, media=store, max_download_bytes=size + 1)
        inbox = Inbox(files)
        async with anyio.create_task_group() as tg:
            await tg.start(channel.run, inbox)
            while True:  # joined: the bot's membership shows in the room
                members = await alice.joined_members(room)
                if bot.user_id in [m.user_id for m in getattr(members, "members", [])]:
                    break
                await anyio.sleep(0.2)
            await anyio.sleep(3)  # settle: start-up allocations done
            idle = rss_kib()
            peak = idle
            stop = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not stop.is_set():
                    peak = max(peak, rss_kib())
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            for uri in uris:
                await alice.room_send(
                    room,
                    "m.room.message",
                    {
                        "msgtype": "m.file",
                        "body": "blob.bin",
                        "url": uri,
                        "info": {"size": size, "mimetype": "application/octet-stream"},
                    },
                )
            await inbox.done.wait()
            elapsed = time.monotonic() - started
            stop.set()
            sampler.join()
            tg.cancel_scope.cancel()
        await alice.close()
        digest = hashlib.sha256(blob.read_bytes()).hexdigest()
        kept = [a for m in inbox.received for a in m.attachments if a.sha256 == digest]
        growth = peak - idle
        print(f"files received:      {files} x {size / 1e6:.1f} MB, {len(kept)} stored intact")
        print(f"time to receive:     {elapsed:.1f} s")
        print(f"idle RSS:            {idle / 1024:.1f} MiB")
        print(f"peak RSS receiving:  {peak / 1024:.1f} MiB")
        print(
            f"growth:              {growth / 1024:.1f} MiB "
            f"(target: within {TARGET_KIB // 1024} MiB)"
        )
        ok = growth <= TARGET_KIB and len(kept) == files
        print("result:              " + ("PASS" if ok else "FAIL"))
        return 0 if ok else 1
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--mb", type=int, default=20)
    args = parser.parse_args()
    sys.exit(anyio.run(main, args.files, args.mb))
