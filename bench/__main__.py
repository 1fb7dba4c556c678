"""`python -m bench`: the benchmark runner (bench/run.py)."""

from __future__ import annotations

import sys

from bench.run import main

sys.exit(main())
