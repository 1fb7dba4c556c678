"""`squidd matrix bootstrap|restore|trust|verify`: the bot account's cross-signing identity.

* `bootstrap` creates the identity (if the daemon has not already) and prints the recovery
  key once: a key the daemon made on its first start is printed and deleted from the data
  dir. `--reset` replaces the account's identity (people then see an identity change).
* `restore` reads the recovery key from a file or stdin and brings the identity back into
  a fresh data dir; the daemon signs its device with it at the next start.

* `verify` (commands/matrix_verify.py) confirms a SAS verification through the running
  daemon.

* `trust USER` accepts an allowed user's new identity after they reset it: the running
  daemon (or the next start) pins their current master key (`--key` to accept only that
  one) and shares keys with them and acts on their messages again.

None opens the daemon's device or crypto store (ops/matrix_identity.py); `trust` leaves
a request the daemon picks up on its next sync.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

from squidd.commands import Commands
from squidd.commands.matrix_verify import add_agent, add_verify
from squidd.config import Settings
from squidd.errors import SquiddError


def register(commands: Commands) -> None:
    matrix = commands.add(
        "matrix",
        help="the bot's Matrix identity (cross-signing) and verification",
        example="squidd matrix bootstrap\nsquidd matrix verify",
    )
    actions = commands.actions(matrix, "matrix_command")
    boot = actions.add(
        "bootstrap",
        help="create the identity and print its recovery key once",
        run=_bootstrap,
        example="squidd matrix bootstrap",
    )
    boot.add_argument(
        "--reset",
        action="store_true",
        help="replace the account's identity with a new one (asks for the password)",
    )
    add_agent(boot)
    restore = actions.add(
        "restore",
        help="bring the identity back from its recovery key",
        run=_restore,
        example="squidd matrix restore --recovery-key-file ./recovery-key.txt",
    )
    restore.add_argument(
        "--recovery-key-file",
        type=Path,
        default=None,
        help="a file holding the recovery key (default: read it from stdin)",
    )
    add_agent(restore)
    add_verify(actions)

    trust = actions.add(
        "trust",
        help="accept an allowed user's new identity (after they reset it)",
        run=_trust,
        example="squidd matrix trust @me:example.org",
    )
    trust.add_argument("user", help="their Matrix id, e.g. @me:example.org")
    trust.add_argument(
        "--key", default=None, help="accept only this master key (as the warning showed it)"
    )
    add_agent(trust)


def _account(args: argparse.Namespace, settings: Settings) -> Settings | None:
    """The settings of the account the command is about: `[matrix]`'s, or with `--agent`
    that agent's own (its `[matrix]` and its data dir); None (said why) when there is none."""
    agent: str | None = args.agent
    if agent is None:
        if settings.matrix.enabled and settings.matrix.e2ee:
            return settings
        print("matrix: the Matrix channel with e2ee is not enabled in the config", file=sys.stderr)
        return None
    for account in settings.matrix_accounts():
        if account.agent == agent and account.channel != "matrix":
            if account.settings.matrix.e2ee:
                return account.settings
            print("matrix: e2ee is off in [matrix]", file=sys.stderr)
            return None
    print(
        f"matrix: agent {agent!r} has no Matrix account of its own ([agents.list.matrix])",
        file=sys.stderr,
    )
    return None


def _ask_password() -> str | None:
    if not sys.stdin.isatty():
        return None
    import getpass  # termios with it: only when a password is asked for

    return getpass.getpass("The homeserver wants the bot account's password: ") or None


def _bootstrap(args: argparse.Namespace, settings: Settings) -> int:
    from squidd.ops.matrix_identity import bootstrap, fingerprint

    account = _account(args, settings)
    if account is None:
        return 1
    try:
        done = anyio.run(lambda: bootstrap(account, reset=args.reset, ask_password=_ask_password))
    except SquiddError as exc:
        print(f"matrix: {exc}", file=sys.stderr)
        return 1
    print(f"master key: {fingerprint(done.master)}")
    # The commands to type next name the agent, as this one did: without `--agent` they
    # would act on the `[matrix]` account instead.
    agent = f" --agent {args.agent}" if args.agent else ""
    if done.recovery_key is None:
        print(
            "the identity is set up; its recovery key was shown when it was made "
            f"(`squidd matrix bootstrap{agent} --reset` makes a new identity)"
        )
        return 0
    print("recovery key (shown once; keep it safe, away from this machine):")
    print(f"  {done.recovery_key}")
    print(f"with it, `squidd matrix restore{agent}` brings this identity back on a new data dir")
    return 0


def _restore(args: argparse.Namespace, settings: Settings) -> int:
    from squidd.ops.matrix_identity import SecretStorageError, fingerprint, restore

    account = _account(args, settings)
    if account is None:
        return 1
    path: Path | None = args.recovery_key_file
    try:
        text = path.read_text() if path is not None else sys.stdin.read()
    except OSError as exc:
        print(f"matrix: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        master = anyio.run(restore, account, text)
    except (SquiddError, SecretStorageError) as exc:
        print(f"matrix: {exc}", file=sys.stderr)
        return 1
    print(f"identity restored: master key {fingerprint(master)}")
    return 0


def _trust(args: argparse.Namespace, settings: Settings) -> int:
    from squidd.gateway.status import socket_path
    from squidd.ops.matrix_identity import request_trust

    account = _account(args, settings)
    if account is None:
        return 1
    user: str = args.user
    if not (user.startswith("@") and ":" in user):
        print(f"matrix: {user!r} is not a Matrix user id like @me:example.org", file=sys.stderr)
        return 2
    key = "".join(args.key.split()) if args.key else None
    outcome = anyio.run(request_trust, account, user, key, socket_path(settings))
    if outcome == "accepted":
        print(f"the running daemon accepted {user}'s current identity")
    elif outcome == "waiting":
        print(f"asked the running daemon to accept {user}'s identity; it has not yet (see its log)")
    else:
        print(f"no daemon runs: {user}'s identity will be accepted when it starts")
    return 0
