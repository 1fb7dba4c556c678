"""The channel seam: a registry of channel factories, and the built-in one.

A `ChannelRegistry` names channel factories, each with the setting that enables it; it is
built explicitly (`builtin_channels()`), nothing registers itself at import. A factory
takes the settings and the media store (for the files that come with messages) and returns
a `core.ports.Channel`. The built-in adapters are imported only when their channel is
enabled, so a daemon without Matrix never loads nio. A new channel is one folder under
`channels/` and one `add` in `builtin_channels`; tests hand the composition root a registry
with their own channels (`squidd.gateway.build.build_daemon(channels=...)`). A channel that
serves HTTP (the API's listener) is added with `add_serving`: its factory also gets the
`Pages` to serve beside its own routes (the dashboard, from the composition root), through
its constructor. A kind the settings may want several of is added with `add_many` (Matrix:
one channel per bot account, `matrix` and `matrix-<agent>`; email: one per mailbox).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from squidd.config import Settings
from squidd.core.ports import Channel, MediaSink
from squidd.errors import ConfigError

ChannelFactory = Callable[[Settings, MediaSink], Channel]
Pages = Callable[[Any], None]
"""More routes for a channel's HTTP listener: called with its (aiohttp) application."""
ServingFactory = Callable[[Settings, MediaSink, Pages | None], Channel]
ChannelsFactory = Callable[[Settings, MediaSink], list[Channel]]
"""A factory of several channels of one kind (Matrix: one per bot account)."""


def _always(settings: Settings) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class _Entry:
    factory: Callable[[Settings, MediaSink, Pages | None], list[Channel]]
    enabled: Callable[[Settings], bool]


class ChannelRegistry:
    """Channel factories by name; `build` makes the enabled ones."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def add(
        self,
        name: str,
        factory: ChannelFactory,
        *,
        enabled: Callable[[Settings], bool] = _always,
    ) -> ChannelRegistry:
        return self.add_serving(name, _Plain(factory), enabled=enabled)

    def add_serving(
        self,
        name: str,
        factory: ServingFactory,
        *,
        enabled: Callable[[Settings], bool] = _always,
    ) -> ChannelRegistry:
        """A channel with an HTTP listener: its factory gets the pages to serve too."""
        return self._add(name, _One(factory), enabled)

    def add_many(
        self,
        name: str,
        factory: ChannelsFactory,
        *,
        enabled: Callable[[Settings], bool] = _always,
    ) -> ChannelRegistry:
        """A kind of channel the settings may want several of (each with its own name)."""
        return self._add(name, _Many(factory), enabled)

    def _add(
        self,
        name: str,
        factory: Callable[[Settings, MediaSink, Pages | None], list[Channel]],
        enabled: Callable[[Settings], bool],
    ) -> ChannelRegistry:
        if name in self._entries:
            raise ValueError(f"a channel factory named {name!r} is already registered")
        self._entries[name] = _Entry(factory, enabled)
        return self

    def names(self) -> list[str]:
        return list(self._entries)

    def build(
        self, settings: Settings, media: MediaSink, pages: Pages | None = None
    ) -> list[Channel]:
        """The channels enabled in `settings`; two with one name are a config problem.
        `pages` go to the channels added with `add_serving`."""
        channels = [
            channel
            for entry in self._entries.values()
            if entry.enabled(settings)
            for channel in entry.factory(settings, media, pages)
        ]
        names = [channel.name for channel in channels]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError([f"two channels are named {', '.join(duplicates)}"])
        return channels


def _matrix(settings: Settings, media: MediaSink) -> list[Channel]:
    """One channel per bot account: `[matrix]`'s, and each agent's own."""
    from squidd.channels.matrix import create_channel  # nio only when Matrix is on

    accounts = settings.matrix_accounts()
    everyone = [account.settings.matrix.user_id for account in accounts]
    return [
        create_channel(account.settings, media=media, name=account.channel, siblings=everyone)
        for account in accounts
    ]


def _email(settings: Settings, media: MediaSink) -> list[Channel]:
    """One channel per mailbox: `[email]`'s, and each agent's own."""
    from squidd.channels.email import create_channel

    return [
        create_channel(account.settings, media=media, name=account.channel)
        for account in settings.mail_accounts()
    ]


def _api(settings: Settings, media: MediaSink, pages: Pages | None) -> Channel:
    from squidd.channels.api import create_channel
    from squidd.store.idempotency import IdempotencyDir

    replies = IdempotencyDir(
        settings.storage.data_dir, lifetime_s=settings.api.idempotency_hours * 3600.0
    )
    return create_channel(settings, replies, pages=pages)


def builtin_channels() -> ChannelRegistry:
    """The channels squidd ships, each enabled by its own config section."""
    return (
        ChannelRegistry()
        .add_many("matrix", _matrix, enabled=lambda settings: bool(settings.matrix_accounts()))
        .add_many("email", _email, enabled=lambda settings: bool(settings.mail_accounts()))
        .add_serving("api", _api, enabled=lambda settings: settings.api.enabled)
    )


def fixed_channels(*channels: Channel) -> ChannelRegistry:
    """A registry of channels already built (tests, embedding): always enabled."""
    registry = ChannelRegistry()
    for channel in channels:
        registry.add(channel.name, _Built(channel))
    return registry


@dataclass(frozen=True, slots=True)
class _Built:
    channel: Channel

    def __call__(self, settings: Settings, media: MediaSink) -> Channel:
        return self.channel


@dataclass(frozen=True, slots=True)
class _One:
    factory: ServingFactory

    def __call__(self, settings: Settings, media: MediaSink, pages: Pages | None) -> list[Channel]:
        return [self.factory(settings, media, pages)]


@dataclass(frozen=True, slots=True)
class _Many:
    factory: ChannelsFactory

    def __call__(self, settings: Settings, media: MediaSink, pages: Pages | None) -> list[Channel]:
        return self.factory(settings, media)


@dataclass(frozen=True, slots=True)
class _Plain:
    """A channel factory without a listener: the pages are none of its business."""

    factory: ChannelFactory

    def __call__(self, settings: Settings, media: MediaSink, pages: Pages | None) -> Channel:
        return self.factory(settings, media)
