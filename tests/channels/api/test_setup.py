"""Setting the API up: `squidd init` writes a random key file (0600) and says how to use
it; `[api]` enabled without a usable key refuses to start with one clear line; the rate
limit and the config's checks."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from squidd.channels.api.keys import ApiKeys
from squidd.channels.api.limits import RateLimit
from squidd.config.api import ApiSettings
from squidd.errors import ConfigError
from tests.channels.api.support import LLM_KEY, free_port, write_keys
from tests.commands.test_init import init
from tests.support.config import write_daemon_config
from tests.support.daemon import daemon_env, run_argv


def test_init_writes_a_private_random_key_and_says_how_to_use_it(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "config.toml"
    first = init(tmp_path, "--config", str(config))
    assert first.returncode == 0, first.stderr
    keys_file = tmp_path / "data" / "squidd" / "api" / "keys"
    assert stat.S_IMODE(keys_file.stat().st_mode) == 0o600
    keys = ApiKeys.load(keys_file)
    assert len(keys) == 1
    assert str(keys_file) in first.stdout and "Authorization: Bearer" in first.stdout
    key = next(line for line in keys_file.read_text().splitlines() if not line.startswith("#"))
    assert key not in first.stdout  # the key stays in its file
    again = init(tmp_path, "--config", str(config))
    assert again.returncode == 0
    assert keys_file.read_text().count(key) == 1
    init(tmp_path / "other", "--config", str(tmp_path / "other.toml"))
    assert key not in (tmp_path / "other" / "data" / "squidd" / "api" / "keys").read_text()


def start_refused(tmp_path: Path, keys_file: Path) -> str:
    api = {"enabled": True, "listen": f"127.0.0.1:{free_port()}", "keys_file": keys_file}
    config = write_daemon_config(tmp_path, "http://127.0.0.1:9/v1", api_key=LLM_KEY, api=api)
    done = subprocess.run(
        run_argv(config), env=daemon_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("config:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_enabled_without_a_key_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    missing = start_refused(tmp_path, tmp_path / "no-such-keys")
    assert "api.keys_file" in missing and "does not exist" in missing
    empty = tmp_path / "empty"
    empty.write_text("# only a comment\n\n")
    empty.chmod(0o600)
    assert "holds no key" in start_refused(tmp_path, empty)
    shared = write_keys(tmp_path / "shared", "sqd-a-perfectly-good-key-1234")
    shared.chmod(0o640)
    assert "readable by others" in start_refused(tmp_path, shared)


def test_a_short_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="shorter"):
        ApiKeys.load(write_keys(tmp_path / "k", "short"))


def test_keys_match_only_whole_keys(tmp_path: Path) -> None:
    keys = ApiKeys.load(
        write_keys(tmp_path / "k", "# c", "sqd-first-key-0123456789", "sqd-second-key-012345678")
    )
    assert len(keys) == 2
    first = keys.match("sqd-first-key-0123456789")
    assert first is not None and first != keys.match("sqd-second-key-012345678")
    assert keys.match("sqd-first-key-012345678") is None
    assert keys.match("") is None
    assert keys.match("# c") is None


def test_rate_limit_refills_per_minute() -> None:
    now = [0.0]
    limit = RateLimit(2, now=lambda: now[0])
    assert limit.take("a") == 0 and limit.take("a") == 0
    assert limit.take("a") == 30  # one more in 30 s at 2 a minute
    assert limit.take("b") == 0  # per key
    now[0] = 30.0
    assert limit.take("a") == 0


@pytest.mark.parametrize("listen", ["127.0.0.1", "example.org:80", "127.0.0.1:99999", ":80"])
def test_listen_must_be_an_address_and_a_port(listen: str) -> None:
    with pytest.raises(ValueError, match="listen"):
        ApiSettings(listen=listen)
