"""`squidd run` with one more channel, for the process tests and the bench.

`python -m tests.support.run_with_channel package.module:function --config FILE` loads the
settings and sets up logging as the CLI does, then hands the composition root the built-in
channels plus the named factory (taking the settings, returning a channel): the daemon's
own process tests feed it through the spool channel, the bench through its load channel.
Channels are no config key: this is how a test passes one to the builder.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from squidd.commands.run import run_command
from squidd.config import Settings, load_settings
from squidd.core.ports import Channel, MediaSink
from squidd.errors import EXIT_CONFIG, ConfigError
from squidd.gateway.channels import builtin_channels
from squidd.log import configure_logging
from squidd.secrets import known_secrets


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_with_channel")
    parser.add_argument("factory", help="package.module:function")
    parser.add_argument("--config", type=Path, default=None)
    args = parser.parse_args(argv)
    module_name, _, attr = str(args.factory).partition(":")
    factory = getattr(importlib.import_module(module_name), attr or "create_channel")
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    level, form = settings.logging.level, settings.logging.format
    configure_logging(level, form, known_secrets=known_secrets(settings))

    def made(settings: Settings, media: MediaSink) -> Channel:
        channel: Channel = factory(settings)
        return channel

    return run_command(settings, channels=builtin_channels().add(args.factory, made))


if __name__ == "__main__":
    sys.exit(main())
