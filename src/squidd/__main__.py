"""`python -m squidd` runs the command line."""

import gc

# Start-up runs with the garbage collector paused, from before the modules every command
# imports; `squidd.cli.main` resumes it (squidd.commands.pause_collection says why).
gc.disable()

from squidd.cli import main  # noqa: E402 - imported with the collector paused

raise SystemExit(main())
