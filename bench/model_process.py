"""The scripted model (tests/support/fake_llm.py) in a process of its own, for benchmarks
that compare squidd with calling the model straight.

In the benchmark's own process the server's threads share one GIL with the client that
drives the load, so the "straight to the model" side would pay for the client's work
and the client for the server's, while squidd's side runs in a process of its own: the
comparison would favour squidd. A model is another process; so is this one.

    with ModelProcess(latency_s=0.5) as model:
        model.base_url   # http://127.0.0.1:<port>/v1

    python -m bench.model_process --latency 0.5    # prints the URL, serves until killed

The child is stopped by its own PID (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.daemon import daemon_env
from tests.support.fake_llm import FakeLLM, Reply, echo_responder


class ModelProcess:
    """`python -m bench.model_process` as a child; `base_url` once it listens."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.base_url = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> ModelProcess:
        self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "bench.model_process", "--latency", str(self.latency_s)],
            env=daemon_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.base_url = self._proc.stdout.readline().strip()
        if not self.base_url:
            self.__exit__(None, None, None)
            raise RuntimeError("the scripted model process did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def serve(latency_s: float) -> None:
    def respond(request: dict[str, Any]) -> Reply:
        reply = echo_responder(request)
        reply.delay = latency_s
        return reply

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with FakeLLM(responder=respond) as llm:
        print(llm.base_url, flush=True)
        stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0)
    serve(parser.parse_args().latency)
