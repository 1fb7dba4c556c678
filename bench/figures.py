"""The figures `bench/run.py` measures, each one entry in `ENTRIES`, with its target.

An entry is a name and a function `measure(quick) -> list[Row]`; a row is one figure of the
table (its value, unit, target and whether it meets it). A later figure (a token budget, a
"hello" turn's tokens, MCP overhead, search latency, attachment RSS) plugs in as one more
entry. Every figure is a median over repeats, and a comparison is a ratio of two figures
measured in the same run, because the machine is shared and absolute times are noisy.
`quick` shrinks every workload to check that the benchmark still runs; its figures are not
held to the targets.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
from bench import bench_build_messages as p1
from bench import bench_start
from bench.daemon_load import LoadedDaemon, household_responder, reporting_usage
from tests.support.fake_llm import FakeLLM, Reply


@dataclass(frozen=True)
class Row:
    figure: str
    value: float
    unit: str
    target: str
    ok: bool | None  # None: reported, no target


@dataclass(frozen=True)
class Entry:
    name: str
    measure: Callable[[bool], list[Row]]


def shm_dir() -> str | None:
    shm = Path("/dev/shm")  # noqa: S108 - mkdtemp makes a private directory under it
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def delayed(latency: float) -> Callable[[dict[str, Any]], Reply]:
    def respond(request: dict[str, Any]) -> Reply:
        reply = household_responder(request)
        reply.delay = latency
        return reply

    return respond


JOURNAL_FSYNCS = 3
"""At most this many fsyncs in a turn with two tool calls (the journal grouped)."""
API_ADDED_MS = 20.0
API_RATIO = 0.9


# --- P1 -------------------------------------------------------------------------------------


def measure_p1(quick: bool) -> list[Row]:
    rounds = 5 if quick else 200
    sizes = (100, 100_000)

    async def run() -> dict[int, float]:
        with tempfile.TemporaryDirectory() as tmp:
            setups = {n: await p1.prepare(Path(tmp) / str(n), n) for n in sizes}
            samples: dict[int, list[float]] = {n: [] for n in sizes}
            for round_no in range(rounds + 10):
                for n in sizes:  # interleaved: load drift hits both sizes alike
                    elapsed = await p1.time_one(*setups[n])
                    if round_no >= 10:
                        samples[n].append(elapsed)
            return {n: statistics.median(samples[n]) for n in sizes}

    medians = anyio.run(run)
    ratio = medians[100_000] / medians[100]
    big_ms = medians[100_000] * 1000
    return [
        Row(
            "P1 work before the model call, 100k / 100 messages", ratio, "x", "<= 1.1", ratio <= 1.1
        ),
        Row("P1 work before the model call at 100k messages", big_ms, "ms", "<= 5", big_ms <= 5),
    ]


# --- P2 -------------------------------------------------------------------------------------


def _burst(cap: int | None, sessions: int, repeats: int, latency: float) -> float:
    gateway = f"max_concurrent_turns = {cap}" if cap else ""
    names = [f"p2-{i:04d}" for i in range(sessions)]
    with LoadedDaemon(gateway=gateway, responder=delayed(latency), base_dir=shm_dir()) as d:
        d.round(names[:2])  # warm: imports, the client's connection pool
        walls = []
        for _ in range(repeats):
            started = time.monotonic()
            d.round(names)
            walls.append((time.monotonic() - started) / latency)
    return statistics.median(walls)


def default_cap() -> int:
    """`gateway.max_concurrent_turns` when the config does not set it."""
    from squidd.config.sections import GatewaySettings

    return GatewaySettings().max_concurrent_turns


def measure_p2(quick: bool) -> list[Row]:
    sessions, latency = (20, 0.1) if quick else (200, 0.5)
    raised = _burst(1000 if not quick else 200, sessions, 1 if quick else 3, latency)
    default = _burst(None, sessions, 1, latency)
    cap = default_cap()
    return [
        Row(
            f"P2 {sessions} sessions x 1 at {latency} s, cap raised: wall / latency",
            raised,
            "x",
            "<= 1.5",
            raised <= 1.5,
        ),
        Row(f"P2 the same at the default cap ({cap}): wall / latency", default, "x", "", None),
    ]


# --- P3 -------------------------------------------------------------------------------------


def measure_p3(quick: bool) -> list[Row]:
    sessions, warm, repeats, rounds = (5, 1, 1, 2) if quick else (50, 4, 5, 4)
    names = [f"p3-{i:04d}" for i in range(sessions)]
    cpu_ms: list[float] = []
    rates: list[float] = []
    with LoadedDaemon(base_dir=shm_dir()) as d:
        d.rounds(names, warm)
        for _ in range(repeats):
            cpu0, t0, n0 = d.cpu_seconds(), time.monotonic(), d.turns
            d.rounds(names, rounds)
            turns = d.turns - n0
            cpu_ms.append((d.cpu_seconds() - cpu0) * 1000 / turns)
            rates.append(turns / (time.monotonic() - t0))
    cpu, rate = statistics.median(cpu_ms), statistics.median(rates)
    return [
        Row("P3 daemon CPU per turn, latency 0", cpu, "ms", "<= 2", cpu <= 2),
        Row(
            f"P3 throughput, {sessions} sessions at latency 0", rate, "msg/s", ">= 200", rate >= 200
        ),
    ]


# --- the provider chain ---------------------------------------------------------------------

_CHAIN = """
providers = [
    {{ name = "main", base_url = "{{url}}" }},
    {{ name = "backup", base_url = "{backup}" }},
]
chain = ["main/m", "backup/m"]
max_retries = 0
"""
_COOLING = """
providers = [{{ name = "dead", base_url = "{dead}" }}, {{ name = "main", base_url = "{{url}}" }}]
chain = ["dead/m", "main/m"]
max_retries = 0
failures_to_cool = 1
cooldown_s = 3600
"""


def _cpu_per_turn(d: LoadedDaemon, names: list[str], rounds: int) -> float:
    cpu0, n0 = d.cpu_seconds(), d.turns
    d.rounds(names, rounds)
    return (d.cpu_seconds() - cpu0) * 1000 / (d.turns - n0)


def measure_chain(quick: bool) -> list[Row]:
    """A chain of two with a healthy head against the one endpoint (P3's load, alternated,
    median CPU per turn of each), and the requests a provider gets while it cools."""
    sessions, warm, repeats, rounds = (5, 1, 1, 2) if quick else (50, 4, 5, 4)
    names = [f"chain-{i:04d}" for i in range(sessions)]
    with FakeLLM(responder=lambda _: Reply(status=503)) as dead:
        shapes = {"one": "", "chain": _CHAIN.format(backup=dead.base_url)}
        cpu: dict[str, list[float]] = {"one": [], "chain": []}
        for _ in range(repeats):
            for shape, llm in shapes.items():
                with LoadedDaemon(base_dir=shm_dir(), llm=llm) as d:
                    d.rounds(names, warm)
                    cpu[shape].append(_cpu_per_turn(d, names, rounds))
        backup_asked = len(dead.chat_requests)
        dead.requests.clear()
        with LoadedDaemon(base_dir=shm_dir(), llm=_COOLING.format(dead=dead.base_url)) as d:
            d.rounds(names[:1], 1)  # the one failure that opens its breaker
            before = len(dead.chat_requests)
            d.rounds(names, rounds)
            while_cooling = len(dead.chat_requests) - before
            turns = sessions * rounds
    one, chain = statistics.median(cpu["one"]), statistics.median(cpu["chain"])
    ratio = chain / one
    return [
        Row("chain of two, healthy head: CPU per turn", chain, "ms", "-", None),
        Row("one endpoint: CPU per turn (same run)", one, "ms", "-", None),
        Row("chain ÷ one endpoint, CPU per turn", ratio, "x", "<= 1.02", ratio <= 1.02),
        Row(
            "requests to the backup while the head answers",
            backup_asked,
            "req",
            "= 0",
            backup_asked == 0,
        ),
        Row(
            f"requests to a cooling provider in {turns} turns",
            while_cooling,
            "req",
            "= 0",
            while_cooling == 0,
        ),
    ]


# --- agents --------------------------------------------------------------------------------


def _p3_by_agents(quick: bool) -> tuple[float, float]:
    """P3's load on a daemon of one agent and of ten (alternated; medians, ms per turn)."""
    sessions, warm, repeats, rounds = (5, 1, 1, 2) if quick else (50, 4, 5, 4)
    names = [f"agents-{i:04d}" for i in range(sessions)]
    ten = "".join(f'[[agents.list]]\nname = "agent{i}"\n' for i in range(10))
    cpu: dict[str, list[float]] = {"one": [], "ten": []}
    for _ in range(repeats):
        for shape, tail in (("one", ""), ("ten", ten)):
            with LoadedDaemon(base_dir=shm_dir(), tail=tail) as d:
                d.rounds(names, warm)
                cpu[shape].append(_cpu_per_turn(d, names, rounds))
    return statistics.median(cpu["one"]), statistics.median(cpu["ten"])


def measure_agents(quick: bool) -> list[Row]:
    from bench import bench_agents

    got = bench_agents.measure(quick)
    (one_s, one_mib), (ten_s, ten_mib) = got[1], got[10]
    start, rss = ten_s - one_s, ten_mib - one_mib
    one_ms, ten_ms = _p3_by_agents(quick)
    p3 = ten_ms / one_ms
    return [
        Row("one agent: P3 CPU per turn", one_ms, "ms", "-", None),
        Row("ten agents: P3 CPU per turn (the default agent's)", ten_ms, "ms", "-", None),
        Row("ten agents ÷ one: P3 CPU per turn", p3, "x", "<= 1.05", p3 <= 1.05),
        Row("one agent: start -> READY=1", one_s, "s", "-", None),
        Row("ten agents: start -> READY=1", ten_s, "s", "-", None),
        Row("ten agents over one: start", start, "s", "<= 0.3", start <= 0.3),
        Row("ten agents over one: idle RSS", rss, "MiB", "<= 10", rss <= 10),
    ]


# --- P4 -------------------------------------------------------------------------------------


def measure_p4(quick: bool) -> list[Row]:
    got = bench_start.measure(quick, with_channels=False)
    rows = [
        Row("P4 start -> READY=1, no channel", got.seconds, "s", "<= 0.6", got.seconds <= 0.6),
        Row("P4 daemon CPU at READY=1, no channel", got.cpu_seconds, "s", "", None),
        Row("P4 idle RSS, no channel", got.rss_mib, "MiB", "", None),
    ]
    if quick:
        return rows  # the servers' start-up is the tests' business; --quick checks the bench
    got = bench_start.measure(quick, with_channels=True)
    return [
        *rows,
        Row("P4 start -> READY=1, Matrix + email", got.seconds, "s", "<= 1.0", got.seconds <= 1.0),
        Row("P4 daemon CPU at READY=1, Matrix + email", got.cpu_seconds, "s", "", None),
        Row("P4 idle RSS, Matrix + email", got.rss_mib, "MiB", "<= 70", got.rss_mib <= 70),
    ]


# --- P5 -------------------------------------------------------------------------------------


def measure_p5(quick: bool) -> list[Row]:
    """The largest prompt of the 100 turns up to turn 200 and up to turn 2,000: a single turn
    would land anywhere on the saw-tooth between two consolidations, the window's peak
    does not. In tokens, as the provider counts a prompt (`daemon_load.prompt_tokens`: the
    messages, the tool calls and the tool schemas); the messages' text alone is printed
    beside it."""
    early, late = (100, 300) if quick else (200, 2000)
    peak: dict[int, int] = {}
    text: dict[int, int] = {}
    with LoadedDaemon(base_dir=shm_dir()) as d:
        for mark in (early, late):
            d.rounds(["p5"], mark - d.turns)
            peak[mark] = max(d.llm.recent_prompt_tokens)
            text[mark] = max(d.llm.recent_prompt_chars)
    ratio = peak[late] / peak[early]
    return [
        Row(
            f"P5 peak prompt tokens, turns to {late} / to {early}, one session",
            ratio,
            "x",
            "<= 1.2",
            ratio <= 1.2,
        ),
        Row(f"P5 peak prompt tokens by turn {late}", peak[late], "tokens", "", None),
        Row(
            f"P5 peak messages' text, turns to {late} / to {early}",
            text[late] / text[early],
            "x",
            "",
            None,
        ),
    ]


# --- P6 -------------------------------------------------------------------------------------


def measure_p6(quick: bool) -> list[Row]:
    sessions, warm, total = (20, 2, 6) if quick else (200, 10, 100)
    names = [f"p6-{i:04d}" for i in range(sessions)]
    # Every reply reports its usage, as a provider's does: the daemon records it per call.
    with LoadedDaemon(base_dir=shm_dir(), responder=reporting_usage(household_responder)) as d:
        d.rounds(names, warm)
        first = d.rss_kib()
        d.rounds(names, total - warm)
        growth = (d.rss_kib() - first) / 1024
    return [
        Row(
            f"P6 RSS growth, turns {sessions * warm} -> {sessions * total} over {sessions} "
            "sessions",
            growth,
            "MiB",
            "<= 5",
            growth <= 5,
        ),
    ]


# --- P7 -------------------------------------------------------------------------------------


def measure_p7(quick: bool) -> list[Row]:
    """Input tokens (chars / 4) of a first "hello" turn per channel, default tools."""
    import contextlib
    import io

    from bench import bench_p7_hello as p7

    from squidd.commands.init import init_command
    from squidd.log import configure_logging

    configure_logging("error", "console", known_secrets=[])
    rows: list[Row] = []
    saved = os.environ.get("XDG_DATA_HOME")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        config = Path(tmp) / "config.toml"
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                init_command(config)
            for channel, target in (("matrix", "!room:example.org"), ("email", "o@example.org")):
                seen = anyio.run(p7.hello, config, channel, target)
                tokens = float(seen["tokens"])
                rows.append(
                    Row(
                        f"P7 first 'hello' turn input tokens, {channel}",
                        tokens,
                        "tokens",
                        f"<= {p7.TARGET}",
                        tokens <= p7.TARGET,
                    )
                )
        finally:
            if saved is None:
                os.environ.pop("XDG_DATA_HOME", None)
            else:
                os.environ["XDG_DATA_HOME"] = saved
    return rows


def measure_p5_budget(quick: bool) -> list[Row]:
    """The budget issue's P5: every prompt within the budget; tokens per turn bounded."""
    from bench import bench_p5_budget as p5b

    turns = 100 if quick else 2000
    got = anyio.run(p5b.measure, turns, 32_000, 5)
    return [
        Row("P5 max prompt tokens / budget", got["peak"], "x", "<= 1.0", got["peak"] <= 1.0),
        Row(
            f"P5 tokens per turn, 50 up to {turns} / 50 up to {max(50, turns // 10)}",
            got["growth"],
            "x",
            "<= 1.2",
            got["growth"] <= 1.2,
        ),
    ]


def measure_mcp(quick: bool) -> list[Row]:
    """MCP tool-call median through squidd / through the SDK directly (echo server)."""
    from bench import bench_mcp_call as mcp

    calls = 20 if quick else 300

    async def run(quiet: TextIO) -> tuple[float, float]:
        sdk = statistics.median(await mcp.direct(calls, "echo", quiet))
        ours = statistics.median(await mcp.through_squidd(calls, "echo", quiet))
        return ours, sdk

    with Path(os.devnull).open("w") as quiet:  # the server's stderr, kept off the table
        ours, sdk = anyio.run(run, quiet)
    return [Row("MCP tool call, through squidd / SDK directly", ours / sdk, "x", "-", None)]


def measure_journal(quick: bool) -> list[Row]:
    """The turn journal: a turn with two tool calls with it and without, and a plain turn."""
    from bench import bench_journal

    result = anyio.run(bench_journal.figures, *((20, 1) if quick else (200, 5)))
    tools_ratio, plain_ratio = result["tools_cpu_ratio"], result["plain_cpu_ratio"]
    return [
        Row("journal: CPU, turn with 2 tool calls, with/without", tools_ratio, "x", "-", None),
        Row(
            "journal: fsyncs per turn with 2 tool calls",
            result["tools_fsyncs_with"],
            "",
            f"<= {JOURNAL_FSYNCS}",
            result["tools_fsyncs_with"] <= JOURNAL_FSYNCS,
        ),
        Row(
            "journal: fsyncs per turn with 2 tool calls, journal off",
            result["tools_fsyncs_without"],
            "",
            "-",
            None,
        ),
        Row(
            # It does no journal work; the spread between runs on a shared machine is
            # about +-15 %, so this is reported, not held to a target.
            "journal: CPU, turn without tool calls, with/without",
            plain_ratio,
            "x",
            "-",
            None,
        ),
    ]


def measure_api(quick: bool) -> list[Row]:
    """The API channel against the scripted model straight (bench_api.py says at which
    model latency each figure is taken, and why)."""
    from bench import bench_api

    one, many = anyio.run(bench_api.pairs, bench_api.shapes(quick))
    return [
        Row(
            f"API c={one.concurrency}, model latency {one.latency_s:g} s: added median",
            one.added_ms,
            "ms",
            f"<= {API_ADDED_MS:g}",
            one.added_ms <= API_ADDED_MS,
        ),
        Row(
            f"API c={many.concurrency}, model latency {many.latency_s:g} s: throughput "
            "through squidd / direct",
            many.ratio,
            "x",
            f">= {API_RATIO:g}",
            many.ratio >= API_RATIO,
        ),
        Row(f"API c={many.concurrency}: added median", many.added_ms, "ms", "-", None),
    ]


def measure_p8(quick: bool) -> list[Row]:
    """P8: the stable prompt prefix kept between turns with automatic recall (bench_p8.py)."""
    from bench import bench_p8

    got = bench_p8.measure(6 if quick else 40)
    (p8, served), (_, served_off) = got["on"], got["off"]
    return [
        Row(
            "P8 stable prompt prefix kept, automatic recall on", p8 * 100, "%", ">= 95", p8 >= 0.95
        ),
        Row("previous request served, automatic recall on", served * 100, "%", "-", None),
        Row("previous request served, automatic recall off", served_off * 100, "%", "-", None),
    ]


def measure_voice(quick: bool) -> list[Row]:
    """Voice replies: a 60 s Ogg/Opus note checked and measured, a long answer split."""
    from bench import bench_voice

    result = bench_voice.figures(3 if quick else 30)
    read = result["read_ms"]
    return [
        Row(
            "voice: read a 60 s Ogg/Opus note (CRCs, duration, waveform)",
            read,
            "ms",
            "<= 50",
            read <= 50,
        ),
        Row("voice: split 20,000 characters into parts", result["split_ms"], "ms", "-", None),
    ]


def measure_search(quick: bool) -> list[Row]:
    """search_history in one 100,000-message session: index build and the slowest query."""
    from bench import bench_search_history as sh

    from squidd.core.models import SessionId
    from squidd.store.jsonl import JsonlStore

    messages, rounds = (2_000, 3) if quick else (100_000, 20)

    async def run(tmp: str) -> tuple[float, float]:
        store = JsonlStore(Path(tmp))
        session = SessionId("bench-one")
        sh.fill(store, session, messages, 1)
        build = await sh.timed(store.search_history(session, "zq0x", limit=10))
        slowest = 0.0
        for query in ("zq50000x", "kayak", "coffee budget"):
            times = [
                await sh.timed(store.search_history(session, query, limit=10))
                for _ in range(rounds)
            ]
            slowest = max(slowest, statistics.median(times))
        return build, slowest * 1000

    with tempfile.TemporaryDirectory() as tmp:
        build, slowest = anyio.run(run, tmp)
    return [
        Row(
            f"search_history index build, {messages:,} messages",
            build,
            "s",
            f"< {sh.BUILD_TARGET_S:.0f}",
            build < sh.BUILD_TARGET_S,
        ),
        Row(
            "search_history slowest query median",
            slowest,
            "ms",
            f"< {sh.SEARCH_TARGET_MS:.0f}",
            slowest < sh.SEARCH_TARGET_MS,
        ),
    ]


def measure_media(quick: bool) -> list[Row]:
    """RSS growth of the Matrix channel receiving large files (own process: RSS is per process)."""
    import re
    import subprocess
    import sys

    files, mb = (2, 2) if quick else (10, 20)
    script = Path(__file__).with_name("bench_media_rss.py")
    done = subprocess.run(  # noqa: S603 - our own interpreter and script, fixed arguments
        [sys.executable, str(script), "--files", str(files), "--mb", str(mb)],
        capture_output=True,
        text=True,
        check=False,
    )
    growth = re.search(r"^growth:\s+([-\d.]+) MiB", done.stdout, re.MULTILINE)
    if growth is None:
        raise RuntimeError(f"bench_media_rss.py gave no figure: {done.stdout}{done.stderr}")
    value = float(growth.group(1))
    return [
        Row(
            f"attachments: RSS growth receiving {files} x {mb} MB over Matrix",
            value,
            "MiB",
            "<= 30",
            "result:              PASS" in done.stdout,  # within 30 MiB and every file intact
        )
    ]


def measure_recall(quick: bool) -> list[Row]:
    """Hybrid recall at 100,000 messages (bench_recall.py, its own process: RSS is per
    process): indexing against a scripted embeddings server, recall p95, RSS growth."""
    import re
    import subprocess
    import sys

    from bench import bench_recall as br

    messages = 5_000 if quick else 100_000
    script = Path(__file__).with_name("bench_recall.py")
    done = subprocess.run(  # noqa: S603 - our own interpreter and script, fixed arguments
        [sys.executable, str(script), "--messages", str(messages)],
        capture_output=True,
        text=True,
        check=False,
    )

    def figure(label: str) -> float:
        found = re.search(rf"^{label}:\s+([-\d.]+)", done.stdout, re.MULTILINE)
        if found is None:
            raise RuntimeError(f"bench_recall.py gave no {label!r}: {done.stdout}{done.stderr}")
        return float(found.group(1))

    p95 = figure("recall p95")
    return [
        Row(f"recall: indexing {messages:,} messages", figure("indexing"), "s", "-", None),
        Row(
            f"recall p95 at {messages:,} messages",
            p95,
            "ms",
            f"<= {br.P95_TARGET_MS:.0f}",
            p95 <= br.P95_TARGET_MS,
        ),
        Row("recall: vector index p95", figure("vector search p95"), "ms", "-", None),
        Row("recall: RSS growth", figure("rss growth"), "MiB", "-", None),
    ]


def measure_stream(quick: bool) -> list[Row]:
    """Matrix streaming by edits at the default pacing (bench_stream.py), against Synapse's
    default rc_message (0.2 events/s after a burst of 10)."""
    from bench import bench_stream as bs

    rows: list[Row] = []
    for r in bs.measure():
        shape = f"{r.chars:,} chars over {r.seconds:.0f} s"
        if r.spent_before:
            shape += f" after {r.spent_before} events"
        rows.append(Row(f"streaming {shape}: edits", r.edits, "edits", "<= 40", r.edits <= 40))
        rows.append(
            Row(
                f"streaming {shape}: homeserver requests (burst in use at most {r.peak:.1f})",
                r.requests,
                "requests",
                f"<= {bs.BURST} + {bs.RATE}/s x {r.seconds:.0f} s",
                r.peak <= bs.BURST,
            )
        )
    return rows


def measure_dashboard(quick: bool) -> list[Row]:
    """The overview rendered server side with 1,000 sessions and 30 days of ledger."""
    from bench import bench_dashboard as bd

    sessions, rounds = (50, 3) if quick else (1000, 20)
    first, median = bd.run(sessions, rounds)
    return [
        Row(f"dashboard overview, {sessions:,} sessions, 30 days, first", first, "ms", "-", None),
        Row(
            "dashboard overview median",
            median,
            "ms",
            f"<= {bd.TARGET_MS:.0f}",
            median <= bd.TARGET_MS,
        ),
    ]


ENTRIES: list[Entry] = [
    Entry("P1", measure_p1),
    Entry("P2", measure_p2),
    Entry("P3", measure_p3),
    Entry("chain", measure_chain),
    Entry("agents", measure_agents),
    Entry("P4", measure_p4),
    Entry("P5", measure_p5),
    Entry("P6", measure_p6),
    Entry("P5b", measure_p5_budget),
    Entry("P7", measure_p7),
    Entry("MCP", measure_mcp),
    Entry("search", measure_search),
    Entry("recall", measure_recall),
    Entry("P8", measure_p8),
    Entry("journal", measure_journal),
    Entry("API", measure_api),
    Entry("voice", measure_voice),
    Entry("media", measure_media),
    Entry("stream", measure_stream),
    Entry("dashboard", measure_dashboard),
]
