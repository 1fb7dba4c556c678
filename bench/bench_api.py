"""What the API channel adds to a model call: requests per second and median latency of
`POST /v1/chat/completions` through a real `squidd run` (API channel, router, agent loop,
history, usage ledger) against the same calls made straight to the scripted model server,
at concurrency 1 and 50, with the ratio printed.

    python bench/bench_api.py            # 200 requests per run
    python bench/bench_api.py --quick    # 40 requests per run

Each concurrent client is its own conversation (`user`), since one conversation's turns
run in order by design.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.channels.api.support import ApiDaemon
from tests.support.fake_llm import FakeLLM

Call = Callable[[openai.AsyncOpenAI, int], Awaitable[None]]


async def measure(client: openai.AsyncOpenAI, total: int, concurrency: int) -> tuple[float, float]:
    """(requests per second, median seconds per request) for `total` requests."""
    latencies: list[float] = []
    next_index = iter(range(total))

    async def worker(worker_id: int) -> None:
        for n in next_index:
            started = time.perf_counter()
            await client.chat.completions.create(
                model="squidd",
                messages=[{"role": "user", "content": f"bench {n}"}],
                user=f"w{worker_id}",
            )
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for worker_id in range(concurrency):
            tg.start_soon(worker, worker_id)
    elapsed = time.perf_counter() - started
    return total / elapsed, statistics.median(latencies)


async def main(total: int) -> None:
    with FakeLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        api = ApiDaemon(
            Path(tmp), llm.base_url, requests_per_minute=1_000_000, max_in_flight=10_000
        )
        try:
            await api.start()
            direct = openai.AsyncOpenAI(base_url=llm.base_url, api_key="x", max_retries=0)
            through = api.client(timeout=300)
            async with direct, through:
                await measure(through, 5, 1)  # warm: imports, first files
                for concurrency in (1, 50):
                    d_rps, d_med = await measure(direct, total, concurrency)
                    a_rps, a_med = await measure(through, total, concurrency)
                    print(
                        f"concurrency {concurrency:>2}: direct {d_rps:7.1f} req/s "
                        f"median {d_med * 1000:6.1f} ms | API {a_rps:7.1f} req/s "
                        f"median {a_med * 1000:6.1f} ms | added {(a_med - d_med) * 1000:6.1f} ms"
                        f" | throughput ratio API/direct {a_rps / d_rps:.2f}"
                    )
        finally:
            api.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    anyio.run(main, 40 if args.quick else 200)
