"""The daemon of bench/daemon_load.py with cProfile switched on by SIGUSR1 and its stats
written (to $BENCH_PROFILE_OUT) by SIGUSR2; run by bench/profile_p3.py."""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from types import FrameType

from tests.support.run_with_channel import main

_profile = cProfile.Profile()


def _start(_signum: int, _frame: FrameType | None) -> None:
    _profile.enable()


def _dump(_signum: int, _frame: FrameType | None) -> None:
    _profile.disable()
    _profile.dump_stats(os.environ["BENCH_PROFILE_OUT"])


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _dump)
    sys.exit(main(sys.argv[1:]))
