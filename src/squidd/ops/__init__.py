"""What only the command line runs: chores an operator starts by hand, never the daemon.

`doctor/` (`squidd doctor`'s checks, and `init --interactive`'s answers tried the same
way), `matrix_identity` (the Matrix cross-signing chores of `squidd matrix ...` and
`config check`). This layer may import the channels (their probes and identity code) and
the gateway's read-only helpers (the status socket); the gateway never imports it.
"""
