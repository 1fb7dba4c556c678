"""One timezone for the owner: top-level `timezone` is what cron, the heartbeat's active
hours and the caps' midnight use unless their section sets its own; a config written
before it existed (each section with its own key, or none) reads as it did."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from squidd.cli import main
from squidd.config import ConfigError, load_settings
from squidd.store.cron_jobs import JobsFile
from squidd.store.usage import UsageLedger


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'{text}\n[storage]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    return path


def test_the_top_level_timezone_is_used_by_cron_heartbeat_and_caps(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, 'timezone = "Europe/Berlin"'))
    assert settings.cron.default_timezone == "Europe/Berlin"
    assert settings.heartbeat.timezone == "Europe/Berlin"
    assert settings.limits.timezone == "Europe/Berlin"


def test_a_section_that_sets_its_own_keeps_it(tmp_path: Path) -> None:
    text = 'timezone = "Europe/Berlin"\n[heartbeat]\ntimezone = "Asia/Tokyo"\n'
    text += '[cron]\ndefault_timezone = "America/New_York"\n'
    settings = load_settings(_config(tmp_path, text))
    assert settings.heartbeat.timezone == "Asia/Tokyo"
    assert settings.cron.default_timezone == "America/New_York"
    assert settings.limits.timezone == "Europe/Berlin"


def test_an_environment_override_of_a_section_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQUIDD_LIMITS__TIMEZONE", "Asia/Tokyo")
    settings = load_settings(_config(tmp_path, 'timezone = "Europe/Berlin"'))
    assert settings.limits.timezone == "Asia/Tokyo"
    assert settings.heartbeat.timezone == "Europe/Berlin"


def test_a_config_written_before_reads_as_it_did(tmp_path: Path) -> None:
    old = '[heartbeat]\ntimezone = "Europe/Paris"\n[limits]\ntimezone = "Asia/Tokyo"\n'
    settings = load_settings(_config(tmp_path, old))
    assert settings.timezone == "UTC"
    assert settings.heartbeat.timezone == "Europe/Paris"
    assert settings.limits.timezone == "Asia/Tokyo"
    assert settings.cron.default_timezone == "UTC"


def test_an_unknown_top_level_timezone_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(_config(tmp_path, 'timezone = "Mars/Olympus"'))
    assert any(p.startswith("timezone: unknown IANA timezone") for p in caught.value.problems)


def test_a_cron_job_added_without_a_timezone_gets_the_owners(tmp_path: Path) -> None:
    cfg = _config(tmp_path, 'timezone = "Europe/Berlin"')
    argv = ["--config", str(cfg), "cron", "add", "--name", "n", "--prompt", "p"]
    assert main([*argv, "--cron", "0 8 * * *"]) == 0
    (job,) = JobsFile(tmp_path / "data").load_sync()
    assert job.timezone == "Europe/Berlin"
    # 08:00 in Berlin is 07:00 or 06:00 UTC, never 08:00.
    assert job.next_run is not None and job.next_run.astimezone(UTC).hour in (6, 7)


def test_the_caps_day_turns_at_the_owners_midnight(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, 'timezone = "Asia/Tokyo"'))
    # 20:00 UTC on the 1st is already the 2nd in Tokyo.
    moment = datetime(2026, 3, 1, 20, 0, tzinfo=UTC)
    ledger = UsageLedger(tmp_path / "data", timezone=settings.limits.timezone, now=lambda: moment)
    assert ledger.today() == "2026-03-02"
