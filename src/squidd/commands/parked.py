"""`squidd parked list|retry ID|drop ID`: the messages parked after repeated failures.

Reads and changes the dead-letter folder (`<data dir>/parked/`, store/parked.py) directly,
so it works whether the daemon runs or not. `retry` only asks: it marks the item, and the
daemon (gateway/parked.py) sends it, at once if it runs (within `gateway.parked_poll_s`),
else at its next start, exactly once. `drop` removes the item for good.
"""

from __future__ import annotations

import argparse
import sys

from squidd.commands import Commands
from squidd.config import Settings
from squidd.core.poison import Parked, ParkState
from squidd.errors import StorageError
from squidd.store.parked import ParkedDir, UnknownParkedError, ask_retry, refuse_retrying

__all__ = ["format_item", "parked_command", "register"]

_REASON_CHARS = 160


def register(commands: Commands) -> None:
    parked = commands.add(
        "parked", help="messages parked after repeated failures", example="squidd parked list"
    )
    actions = commands.actions(parked, "parked_command")
    actions.add(
        "list",
        help="list the parked messages, each with its id and reason",
        run=_run,
        example="squidd parked list",
    )
    actions.add(
        "retry",
        help="send one again (once), after a fix",
        run=_run,
        example="squidd parked retry ID",
    ).add_argument("id")
    actions.add(
        "drop", help="remove one for good", run=_run, example="squidd parked drop ID"
    ).add_argument("id")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return parked_command(settings, args.parked_command, getattr(args, "id", None))


def format_item(item: Parked) -> str:
    reason = item.reason if len(item.reason) <= _REASON_CHARS else item.reason[:159] + "…"
    kept = "reply kept" if item.reply is not None else "no reply kept"
    retries = f", retried {item.retries}x" if item.retries else ""
    when = item.parked_at.isoformat(timespec="seconds")
    return (
        f"{item.id}  {when}  {item.state.value:<8}  {item.channel} {item.session_id}\n"
        f"    {item.attempts} attempts{retries}, {kept}: {reason}"
    )


def _list(folder: ParkedDir) -> int:
    items = folder.list_sync()
    if not items:
        print(f"no parked messages (in {folder.dir})")
        return 0
    print(f"{len(items)} parked (in {folder.dir}):")
    for item in items:
        print(format_item(item))
    return 0


def _retry(folder: ParkedDir, item_id: str, poll_s: float) -> int:
    before = folder.change_sync(item_id, ask_retry)
    if before.state is not ParkState.PARKED:
        print(f"{item_id} is already being sent again ({before.state.value})")
        return 0
    print(
        f"{item_id} will be sent again: by the running daemon within {poll_s:g} s, "
        "or at its next start"
    )
    return 0


def _drop(folder: ParkedDir, item_id: str) -> int:
    folder.change_sync(item_id, refuse_retrying)
    print(f"{item_id} dropped")
    return 0


def parked_command(settings: Settings, action: str, item_id: str | None = None) -> int:
    folder = ParkedDir(settings.storage.data_dir)
    try:
        if action == "list":
            return _list(folder)
        if item_id is None:
            print(f"squidd parked {action} needs an ID (see `squidd parked list`)", file=sys.stderr)
            return 2
        if action == "retry":
            return _retry(folder, item_id, settings.gateway.parked_poll_s)
        if action == "drop":
            return _drop(folder, item_id)
    except UnknownParkedError:
        print(
            f"no parked message has the id {item_id!r} (see `squidd parked list`)", file=sys.stderr
        )
        return 1
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except StorageError as exc:
        print(f"cannot read the parked messages: {exc}", file=sys.stderr)
        return 1
    raise AssertionError(f"unhandled action {action}")  # pragma: no cover
