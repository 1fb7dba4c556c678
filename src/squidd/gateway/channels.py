"""Channel construction: the enabled channels, built from the settings.

An adapter is imported only when its channel is enabled, so a daemon without Matrix never
loads nio. `gateway.extra_channels` names further factories (`module:function`), which is
how the tests plug in their loopback channels.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from squidd.config import Settings
from squidd.core.ports import Channel, MediaSink
from squidd.errors import ConfigError

ChannelFactory = Callable[..., Channel]  # (settings) -> Channel; built-ins also take media=


def _factory(spec: str) -> ChannelFactory:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    factory = getattr(module, attr or "create_channel")
    if not callable(factory):
        raise TypeError(f"{spec} is not callable")
    return factory  # type: ignore[no-any-return]


def build_channels(settings: Settings, *, media: MediaSink | None = None) -> list[Channel]:
    """The enabled channels; adapters are imported only when enabled. The built-in ones get
    the media store for the files that come with messages."""
    factories: list[tuple[str, ChannelFactory]] = []
    specs = [
        *(["squidd.channels.matrix:create_channel"] if settings.matrix.enabled else []),
        *(["squidd.channels.email:create_channel"] if settings.email.enabled else []),
    ]
    problems: list[str] = []
    for spec in specs:
        factories.append((spec, functools.partial(_factory(spec), media=media)))
    for spec in settings.gateway.extra_channels:
        try:
            factories.append((spec, _factory(spec)))
        except (ImportError, AttributeError, TypeError) as exc:
            problems.append(f"gateway.extra_channels: cannot load {spec!r}: {exc}")
    if problems:
        raise ConfigError(problems)
    channels = [factory(settings) for _, factory in factories]
    names = [channel.name for channel in channels]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError([f"two channels are named {', '.join(duplicates)}"])
    return channels
