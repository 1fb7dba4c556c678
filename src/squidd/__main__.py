"""`python -m squidd` runs the command line."""

from squidd.cli import main

raise SystemExit(main())
