"""`squidd rooms`: the bot's Matrix rooms with their names and members, asked of the running
daemon (its synced client knows them); for those who want a room id for a cron target or a
config key. Exit 1 when no daemon answers or Matrix is not connected, with the reason."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from squidd.commands import Commands
from squidd.config import Settings
from squidd.gateway.status import ask, socket_path
from squidd.log import escape_unprintable


def register(commands: Commands) -> None:
    parser = commands.add(
        "rooms",
        help="list the bot's Matrix rooms with names and members (asks the running daemon)",
        run=_run,
        example="squidd rooms\nsquidd rooms --ids",
    )
    parser.add_argument("--ids", action="store_true", help="print the room ids only")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return rooms_command(settings, ids_only=args.ids)


def format_rooms(rooms: list[dict[str, Any]], *, ids_only: bool = False) -> str:
    if not rooms:
        return "The bot is in no Matrix room yet (invite it from your client)."
    lines = []
    for room in rooms:
        if ids_only:
            lines.append(str(room["room_id"]))
            continue
        lock = ", encrypted" if room.get("encrypted") else ""
        name = escape_unprintable(str(room.get("name") or "(no name)"))
        lines.append(f"{room['room_id']}  {name}{lock}")
        members = ", ".join(escape_unprintable(str(m)) for m in room.get("members") or [])
        lines.append(f"  members: {members or '-'}")
        if room.get("invited"):
            invited = ", ".join(escape_unprintable(str(m)) for m in room["invited"])
            lines.append(f"  invited: {invited}")
    return "\n".join(lines)


def rooms_command(settings: Settings, *, ids_only: bool = False) -> int:
    if not settings.matrix.enabled:
        print("rooms: the Matrix channel is off (matrix.enabled = false)", file=sys.stderr)
        return 1
    path = socket_path(settings)
    try:
        answer = ask(path, {"op": "matrix.rooms"}, timeout_s=10.0)
    except (OSError, ValueError, TypeError):
        print(
            f"rooms: squidd is not running (no daemon answers on {path}); start it with "
            "`squidd run` to list the bot's rooms",
            file=sys.stderr,
        )
        return 1
    if "error" in answer:
        print(f"rooms: {answer['error']}", file=sys.stderr)
        return 1
    print(format_rooms(list(answer.get("rooms") or []), ids_only=ids_only))
    return 0
