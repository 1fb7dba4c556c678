"""`squidd doctor`: check the config, the machine and every server squidd talks to.

One line per check, ✓ or ✗ with the fix in words (ops/doctor/); exit 1 when something
is wrong, `--json` for scripts, `--no-llm-call` to skip the one-token request. A config
that does not load is itself a ✗ line (exit 1, not 2: the doctor ran and found it).
"""

from __future__ import annotations

import argparse
import os

from squidd.commands import Commands, Start
from squidd.errors import EXIT_FAILURE, EXIT_OK, ConfigError

__all__ = ["register"]


def register(commands: Commands) -> None:
    doctor = commands.add(
        "doctor",
        help="check the config, the data dir and every server; say what to fix",
        run=_run,
        start=Start.ARGS,
        example="squidd doctor\nsquidd --config /etc/squidd/config.toml doctor",
    )
    doctor.add_argument("--json", action="store_true", help="print one JSON document")
    doctor.add_argument(
        "--no-llm-call", action="store_true", help="do not send the one-token LLM request"
    )


def _run(args: argparse.Namespace) -> int:
    import anyio

    from squidd.config import load_settings
    from squidd.log import configure_logging
    from squidd.ops.doctor import Check
    from squidd.ops.doctor.report import render_json, render_text, run_checks
    from squidd.secrets import known_secrets

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        checks = [Check.fail("config", "; ".join(exc.problems), "fix the lines named above")]
    else:
        # Only real trouble interleaves with the report; the lines say the rest.
        configure_logging("error", "console", known_secrets=known_secrets(settings))
        with open(os.devnull, "w") as errlog:  # the MCP servers' own stderr
            checks = anyio.run(
                lambda: run_checks(settings, llm_call=not args.no_llm_call, errlog=errlog)
            )
    print(render_json(checks) if args.json else render_text(checks))
    return EXIT_FAILURE if any(check.failed for check in checks) else EXIT_OK
