"""What the API channel adds to a model call: requests per second and median latency of
`POST /v1/chat/completions` through a real `squidd run` (API channel, router, agent loop,
history, usage ledger, at the daemon's default concurrency cap) against the same calls
made straight to the scripted model server (in a process of its own,
bench/model_process.py), with the ratio printed.

    python bench/bench_api.py            # c=1: 200 requests; c=50: 500 requests
    python bench/bench_api.py --quick    # a few requests, to check the bench runs

Two figures, each at the model latency that makes it mean something:

- c=1, the model answering at once (latency 0): the milliseconds squidd adds to one
  request. With no model time to hide in, this is the whole of squidd's cost per request.
- c=50, the model taking 0.5 s (`LATENCY_S`, a short real answer): throughput through
  squidd over throughput straight to the model. At latency 0 the direct figure would be
  the scripted server's own speed (a Python thread per request, sharing this process with
  the client), so the ratio would compare squidd with the test harness, not with a model;
  at 0.5 s, 50 clients straight to the model make 100 requests a second, and the ratio
  says how much of that squidd keeps (the issue: squidd should cost <= 1 % of a 0.5 s
  call).

Each concurrent client is its own conversation (`user`), since one conversation's turns
run in order by design. Direct and through squidd alternate in slices of the requests,
and each figure is taken over all the slices of its side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.model_process import ModelProcess
from tests.channels.api.support import ApiDaemon

LATENCY_S = 0.5
"""The scripted model's latency for the concurrent figure (the module says why)."""
CHUNKS = 4


@dataclass(frozen=True)
class Pair:
    """One shape (concurrency, model latency) measured straight and through squidd."""

    concurrency: int
    latency_s: float
    direct_rps: float
    direct_median_s: float
    api_rps: float
    api_median_s: float

    @property
    def added_ms(self) -> float:
        return (self.api_median_s - self.direct_median_s) * 1000

    @property
    def ratio(self) -> float:
        return self.api_rps / self.direct_rps

    def line(self) -> str:
        return (
            f"concurrency {self.concurrency:>2}, model latency {self.latency_s:.1f} s: direct "
            f"{self.direct_rps:7.1f} req/s median {self.direct_median_s * 1000:6.1f} ms | API "
            f"{self.api_rps:7.1f} req/s median {self.api_median_s * 1000:6.1f} ms | added "
            f"{self.added_ms:6.1f} ms | throughput ratio API/direct {self.ratio:.2f}"
        )


async def measure(client: openai.AsyncOpenAI, total: int, concurrency: int) -> tuple[float, float]:
    """(requests per second, median seconds per request) for `total` requests."""
    elapsed, latencies = await timed(client, total, concurrency)
    return total / elapsed, statistics.median(latencies)


async def timed(
    client: openai.AsyncOpenAI, total: int, concurrency: int
) -> tuple[float, list[float]]:
    """(seconds in all, seconds of each request) for `total` requests."""
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
    return time.perf_counter() - started, latencies


async def alternated(
    direct: openai.AsyncOpenAI, through: openai.AsyncOpenAI, total: int, concurrency: int
) -> tuple[float, float, float, float]:
    """Direct and through squidd in `CHUNKS` alternating slices of `total` requests each
    (the machine is shared: a load that comes and goes hits both alike): requests per
    second and median seconds per request of each, over all their slices."""
    spent = {"direct": 0.0, "api": 0.0}
    seen: dict[str, list[float]] = {"direct": [], "api": []}
    for chunk in range(CHUNKS):
        order = (("direct", direct), ("api", through))
        for name, client in order if chunk % 2 == 0 else reversed(order):
            elapsed, latencies = await timed(client, total // CHUNKS, concurrency)
            spent[name] += elapsed
            seen[name] += latencies
    done = CHUNKS * (total // CHUNKS)
    return (
        done / spent["direct"],
        statistics.median(seen["direct"]),
        done / spent["api"],
        statistics.median(seen["api"]),
    )


async def pairs(shapes: list[tuple[int, float, int]], cap: int | None = None) -> list[Pair]:
    """Each (concurrency, latency, requests) measured straight to the model and through a
    `squidd run` of its own (warmed first: imports, first files, each conversation once);
    `cap`: its `max_concurrent_turns` instead of the default."""
    out: list[Pair] = []
    gateway: dict[str, Any] = {"shutdown_grace_s": 2}
    if cap is not None:
        gateway["max_concurrent_turns"] = cap
    for concurrency, seconds, total in shapes:
        with ModelProcess(seconds) as model, tempfile.TemporaryDirectory() as tmp:
            api = ApiDaemon(
                Path(tmp),
                model.base_url,
                sections={"gateway": gateway},
                requests_per_minute=1_000_000,
                max_in_flight=10_000,
            )
            try:
                await api.start()
                direct = openai.AsyncOpenAI(base_url=model.base_url, api_key="x", max_retries=0)
                through = api.client(timeout=300)
                async with direct, through:
                    await measure(through, 5, 1)
                    await measure(through, concurrency, concurrency)
                    await measure(direct, concurrency, concurrency)
                    figures = await alternated(direct, through, total, concurrency)
                    out.append(Pair(concurrency, seconds, *figures))
            finally:
                api.close()
    return out


def shapes(quick: bool) -> list[tuple[int, float, int]]:
    """(concurrency, model latency, requests) of the two figures."""
    if quick:
        return [(1, 0.0, 20), (10, 0.1, 40)]
    return [(1, 0.0, 200), (50, LATENCY_S, 500)]


async def main(quick: bool, cap: int | None) -> None:
    for pair in await pairs(shapes(quick), cap):
        print(pair.line())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cap", type=int, default=None, help="max_concurrent_turns to use")
    args = parser.parse_args()
    anyio.run(main, args.quick, args.cap)
