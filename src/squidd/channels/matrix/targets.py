"""The bot's rooms listed (`squidd rooms`), and a cron job's Matrix target as people write
it made a room the bot can post in: a room id the bot is in, an alias resolved to its room,
or a person's direct chat with the bot (found among the bot's rooms, else created with the
person invited). The answers of the channel's `matrix.rooms` and `matrix.check_target`
operator requests (gateway/cron_targets.py asks the latter when a job is added):
`{"target": "matrix:!room:server"}` (`matrix-<agent>:…` for an agent's own account) or
`{"error": reason}`.
"""

from __future__ import annotations

from typing import Any

from nio import (
    AsyncClient,
    ProfileGetError,
    RoomCreateError,
    RoomResolveAliasError,
)

__all__ = ["check_target", "direct_room", "room_list"]

_ENCRYPTION = {
    "type": "m.room.encryption",
    "state_key": "",
    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
}


def direct_room(client: AsyncClient, person: str) -> str | None:
    """The bot's room with `person` and nobody else (joined or invited), the oldest known."""
    me = client.user_id
    for room_id, room in client.rooms.items():
        members = set(room.users) | set(room.invited_users)
        if members == {me, person}:
            return str(room_id)
    return None


def room_list(client: AsyncClient) -> list[dict[str, Any]]:
    """The bot's rooms with their names and members (joined, then invited), for `squidd
    rooms`: the ids people would otherwise copy from the log."""
    rooms = []
    for room_id, room in sorted(client.rooms.items()):
        rooms.append(
            {
                "room_id": str(room_id),
                "name": room.display_name,
                "encrypted": bool(room.encrypted),
                "members": sorted(room.users),
                "invited": sorted(room.invited_users),
            }
        )
    return rooms


async def check_target(
    client: AsyncClient, address: str, *, e2ee: bool, channel: str = "matrix"
) -> dict[str, Any]:
    """`address` as a room of `channel` (the account of `client`), or the reason not."""
    if address.startswith("!"):
        if address not in client.rooms:
            return {"error": f"the bot is not in room {address} (invite it, then add the job)"}
        return {"target": f"{channel}:{address}"}
    if address.startswith("#"):
        resolved = await client.room_resolve_alias(address)
        if isinstance(resolved, RoomResolveAliasError):
            return {"error": f"no room has the alias {address} ({resolved.message})"}
        if resolved.room_id not in client.rooms:
            return {"error": f"the bot is not in {address} ({resolved.room_id}); invite it first"}
        return {"target": f"{channel}:{resolved.room_id}"}
    return await _person(client, address, e2ee=e2ee, channel=channel)


async def _person(client: AsyncClient, person: str, *, e2ee: bool, channel: str) -> dict[str, Any]:
    found = direct_room(client, person)
    if found is not None:
        return {"target": f"{channel}:{found}"}
    profile = await client.get_profile(person)
    if isinstance(profile, ProfileGetError):
        return {"error": f"no Matrix user {person} ({profile.message})"}
    made = await client.room_create(
        is_direct=True, invite=[person], initial_state=[_ENCRYPTION] if e2ee else []
    )
    if isinstance(made, RoomCreateError):
        return {"error": f"could not open a direct chat with {person} ({made.message})"}
    return {"target": f"{channel}:{made.room_id}"}
