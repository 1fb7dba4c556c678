"""Room invites answered once each: joined when an allowed user invites, else declined.

An invite is answered the first time a sync shows it; a failed join is tried again on the
next sync. Leaving or joining a room forgets its invite, so a later invite to the same room
is answered afresh. The ids of answered invites outlive a reconnect (the channel keeps them).
A join or a decline is a membership event: it spends from the account's rate budget.
"""

from __future__ import annotations

import structlog
from nio import AsyncClient, ErrorResponse, InviteMemberEvent, JoinResponse, SyncResponse

from squidd.channels.matrix.client import call
from squidd.channels.matrix.policy import Policy
from squidd.channels.matrix.rate import Priority, budget_for
from squidd.text import clean_text

log = structlog.get_logger()


async def answer_invites(
    client: AsyncClient, policy: Policy, response: SyncResponse, seen: set[str]
) -> None:
    """Join or decline each new invite in `response`; `seen` holds the answered room ids."""
    # A room we joined or left may invite us again later: that invite is new.
    seen -= set(response.rooms.join) | set(response.rooms.leave)
    for room_id, info in response.rooms.invite.items():
        if room_id in seen:
            continue
        inviter = ""
        for event in info.invite_state:
            if (
                isinstance(event, InviteMemberEvent)
                and event.state_key == client.user_id
                and event.membership == "invite"
            ):
                inviter = event.sender
        seen.add(room_id)
        # A user id that is not valid text is no one's: declined, and logged cleaned.
        valid = bool(inviter) and clean_text(inviter) == inviter
        inviter = clean_text(inviter)
        if valid and policy.invite_accepted(inviter):
            async with budget_for(client).spend(Priority.REPLY):  # a join is an event too
                joined = await call("joining a room", client.join(room_id))
            if isinstance(joined, JoinResponse):
                log.info("matrix_invite_accepted", room=room_id, inviter=inviter)
            else:
                seen.discard(room_id)  # try again on the next sync
                log.warning(
                    "matrix_join_failed", room=room_id, reason=getattr(joined, "message", "")
                )
        else:
            log.info("matrix_invite_declined", room=room_id, inviter=inviter or "unknown")
            async with budget_for(client).spend(Priority.REPLY):
                left = await call("declining an invite", client.room_leave(room_id))
            if isinstance(left, ErrorResponse):
                log.warning("matrix_decline_failed", room=room_id, reason=left.message)
