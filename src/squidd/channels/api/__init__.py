"""The API channel: an OpenAI-compatible HTTP endpoint (`POST /v1/chat/completions`,
`GET /v1/models`) in front of the router, on aiohttp's server.

`create_channel(settings, replies)` is what the composition root calls; it reads the keys
file and refuses (`ConfigError`, one line) to build an API without a key. The pieces:
`channel` (requests as inbound messages, replies stored by Idempotency-Key), `server`
(routes and the checks every request passes), `requests` (a request while the router has
it, and its stored reply), `wire` (the OpenAI request and reply shapes),
`keys` (the bearer keys) and `limits` (the per-key rate limit).
"""

from __future__ import annotations

from squidd.channels.api.channel import ApiChannel, Pages
from squidd.channels.api.keys import ApiKeys
from squidd.channels.api.requests import ReplyStore
from squidd.config import Settings

__all__ = ["ApiChannel", "ReplyStore", "create_channel"]


def create_channel(
    settings: Settings, replies: ReplyStore, *, pages: Pages | None = None
) -> ApiChannel:
    """The API channel for `settings.api`, its replies kept in `replies`, serving `pages`
    (the dashboard) beside the API."""
    keys = ApiKeys.load(settings.api.keys_path(settings.storage.data_dir))
    agents = tuple(settings.agent_names) if settings.agents.list else ()
    return ApiChannel(settings.api, keys, replies, pages=pages, agents=agents)
