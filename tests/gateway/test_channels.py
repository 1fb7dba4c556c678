"""The channel registry: factories by name, built explicitly; an adapter is imported only
when its channel is enabled; two channels of one name are a config problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squidd.config import Settings
from squidd.core.ports import Channel, MediaSink
from squidd.errors import ConfigError
from squidd.gateway.channels import ChannelRegistry, builtin_channels, fixed_channels
from tests.support.config import write_daemon_config
from tests.support.daemon import run_python
from tests.support.memory_channel import MemoryChannel

PROBE = """
import json, sys
from pathlib import Path
from squidd.config import load_settings
from squidd.gateway.channels import builtin_channels
from squidd.store.media import MediaStore

settings = load_settings(Path(sys.argv[1]))
built = builtin_channels().build(settings, MediaStore(settings.storage.data_dir, lifetime_s=1))
loaded = [m for m in ("nio", "aioimaplib", "squidd.channels.matrix", "squidd.channels.email")
          if m in sys.modules]
print(json.dumps({"built": [c.name for c in built], "loaded": loaded}))
"""


def settings_for(tmp_path: Path) -> Settings:
    return Settings.model_validate(
        {
            "llm": {"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-channels"},
            "storage": {"data_dir": str(tmp_path)},
        }
    )


def test_the_builtin_registry_names_matrix_email_and_api() -> None:
    assert builtin_channels().names() == ["matrix", "email", "api"]
    assert builtin_channels() is not builtin_channels()  # built when asked, not at import


def test_no_adapter_is_imported_while_its_channel_is_off(tmp_path: Path) -> None:
    config = write_daemon_config(tmp_path, "http://127.0.0.1:9/v1", api_key="sk-channels")
    probe = run_python("-c", PROBE, str(config))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == {"built": [], "loaded": []}


def test_enabled_factories_are_built_with_the_settings_and_the_media_store(
    tmp_path: Path,
) -> None:
    seen: list[tuple[Settings, MediaSink]] = []

    def factory(settings: Settings, media: MediaSink) -> Channel:
        seen.append((settings, media))
        return MemoryChannel("one")

    registry = (
        ChannelRegistry()
        .add("one", factory)
        .add("off", lambda settings, media: MemoryChannel("off"), enabled=lambda settings: False)
    )
    settings = settings_for(tmp_path)
    media = object()
    built = registry.build(settings, media)  # type: ignore[arg-type]
    assert [channel.name for channel in built] == ["one"]
    assert seen == [(settings, media)]


def test_two_channels_of_one_name_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="already registered"):
        ChannelRegistry().add("a", lambda s, m: MemoryChannel("a")).add(
            "a", lambda s, m: MemoryChannel("a")
        )
    registry = fixed_channels(MemoryChannel("x")).add("y", lambda s, m: MemoryChannel("x"))
    with pytest.raises(ConfigError, match="two channels are named x"):
        registry.build(settings_for(tmp_path), object())  # type: ignore[arg-type]
