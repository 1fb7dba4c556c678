"""`squidd config check`: validate the file and say what will run."""

from __future__ import annotations

from pathlib import Path

from squidd.config import Settings, find_config_file


def check_command(settings: Settings, explicit: Path | None) -> int:
    """Settings were already validated by the loader (problems exit 2 before we get here)."""
    source = find_config_file(explicit)
    print(f"config ok: {source if source else '(no file, defaults and environment)'}")
    print(f"  data dir:  {settings.storage.data_dir}")
    print(f"  workspace: {settings.workspace_dir}")
    print(f"  llm:       {settings.llm.model} at {settings.llm.base_url}")
    if settings.llm.api_key is None:
        print("  warning:   llm.api_key is not set (fine for endpoints that need none)")
    channels = [name for name in ("matrix", "email") if getattr(settings, name).enabled]
    print(f"  channels:  {', '.join(channels) if channels else 'none enabled'}")
    print(f"  heartbeat: {'on' if settings.heartbeat.enabled else 'off'}")
    return 0
