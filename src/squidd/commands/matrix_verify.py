"""`squidd matrix verify`: the operator's side of a SAS verification with the running bot.

Someone the bot serves asks their client (Element: "Verify" on the bot) to verify it; the
daemon answers, and once the keys are traded it has emoji and numbers to compare. This
command asks the running daemon over its status socket (never opening the crypto store a
second time, which would corrupt its Olm sessions) and lists the verifications with their
emoji; with a terminal it asks whether they match what the person's client shows, else
`--yes` / `--no` answer for the one waiting (or the one named by its id or user id).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from squidd.commands import Commands
from squidd.config import Settings
from squidd.config.accounts import account_channel
from squidd.gateway.status import ask, socket_path


def add_verify(actions: Commands) -> None:
    verify = actions.add(
        "verify",
        help="compare a verification's emoji and confirm it",
        run=_run,
        example="squidd matrix verify\nsquidd matrix verify @me:example.org --yes",
    )
    verify.add_argument("id", nargs="?", default=None, help="a verification id or user id")
    answer = verify.add_mutually_exclusive_group()
    answer.add_argument("--yes", action="store_true", help="the emoji match: verify")
    answer.add_argument("--no", action="store_true", help="they differ: cancel")
    add_agent(verify)


def add_agent(action: argparse.ArgumentParser) -> None:
    action.add_argument(
        "--agent",
        default=None,
        help="the agent whose own bot account it is about ([agents.list.matrix]); "
        "default: the [matrix] account",
    )


def describe(flow: dict[str, Any]) -> str:
    lines = [f"{flow['id']}  {flow['user_id']} (device {flow['device_id']}): {flow['state']}"]
    if flow.get("emoji"):
        lines.append("  " + "  ".join(f"{symbol} {name}" for symbol, name in flow["emoji"]))
        lines.append("  " + " ".join(str(n) for n in flow["decimals"] or []))
    if flow.get("cancel_code"):
        lines.append(f"  cancelled: {flow['cancel_code']}")
    return "\n".join(lines)


def _ask(settings: Settings, request: dict[str, Any]) -> dict[str, Any] | None:
    path = socket_path(settings)
    try:
        answer = ask(path, request, timeout_s=30.0)
    except (OSError, ValueError, TypeError):
        print(f"squidd is not running (no daemon answers on {path})", file=sys.stderr)
        return None
    if "error" in answer:
        print(f"matrix verify: {answer['error']}", file=sys.stderr)
        return None
    return answer


def _run(args: argparse.Namespace, settings: Settings) -> int:
    channel = "matrix" if args.agent is None else account_channel(args.agent)
    listing = _ask(settings, {"op": f"{channel}.verifications"})
    if listing is None:
        return 1
    flows = [
        f for f in listing["verifications"] if not args.id or args.id in (f["id"], f["user_id"])
    ]
    for flow in flows:
        print(describe(flow))
    waiting = [f for f in flows if f["state"] == "keys"]
    match: bool | None = True if args.yes else False if args.no else None
    if match is None and len(waiting) == 1 and sys.stdin.isatty():
        reply = input("Do these match what the other side shows? [y/N] ")
        match = reply.strip().lower() in ("y", "yes")
    if match is None:
        if not flows:
            print("no verification in progress")
        return 0
    answer = _ask(settings, {"op": f"{channel}.verify", "id": args.id, "match": match})
    if answer is None:
        return 1
    print(describe(answer["verification"]))
    return 0
