"""A download killed half way: the media store keeps the partial file a SIGKILL leaves (its
`.incoming-*` temporary), and the next `squidd run` removes it at start, before any channel
runs, while the files that were complete stay."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from squidd.store.media import MediaStore
from tests.faults.harness import SpoolDaemon, wait_until
from tests.support.fake_llm import FakeLLM

# A download that writes its first chunk, says so, and then hangs until it is killed.
DOWNLOADER = """
import sys, anyio
from pathlib import Path
from squidd.store.media import MediaStore

async def chunks():
    yield b"first part of a large file " * 1000
    Path(sys.argv[2]).write_text("written")
    await anyio.sleep_forever()

async def main():
    store = MediaStore(Path(sys.argv[1]), lifetime_s=3600)
    await store.save("matrix:!room:x", kind="file", name="big.pdf", mime="application/pdf",
                     chunks=chunks(), max_bytes=10**9)

anyio.run(main)
"""


async def _one_chunk(data: bytes) -> AsyncIterator[bytes]:
    yield data


def test_a_partial_download_left_by_sigkill_is_removed_at_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    daemon = SpoolDaemon(tmp_path, fake_llm.base_url, api_key="sk-test-media-partial-4242")
    kept_data = b"%PDF a complete file"
    store = MediaStore(daemon.data, lifetime_s=3600)
    kept = anyio.run(
        lambda: store.save(
            "matrix:!room:x",
            kind="file",
            name="done.pdf",
            mime="application/pdf",
            chunks=_one_chunk(kept_data),
            max_bytes=1000,
        )
    )
    written = tmp_path / "written"
    downloader = subprocess.Popen(
        [sys.executable, "-c", DOWNLOADER, str(daemon.data), str(written)]
    )
    try:
        wait_until(written.exists, "the download to write its first chunk")
        downloader.send_signal(signal.SIGKILL)
        downloader.wait(timeout=30)
    finally:
        downloader.kill()
    session_dir = store.session_dir("matrix:!room:x")
    [partial] = list(session_dir.glob(".incoming-*"))  # what the crash left
    assert partial.stat().st_size > 0

    run = daemon.start()
    try:
        wait_until(lambda: run.count("daemon_ready") == 1, "the daemon to be ready")
        assert not partial.exists()
        assert kept.path is not None
        assert Path(kept.path).read_bytes() == kept_data  # complete files stay
        assert Path(kept.path).name == hashlib.sha256(kept_data).hexdigest() + ".pdf"
        assert run.count("media_partial_files_removed") == 1
    finally:
        daemon.close()
