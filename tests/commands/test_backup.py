"""`squidd backup create|verify|restore` and the data dir's format at `squidd run`, as real
processes: exit codes and the lines a person reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squidd.store.format import CURRENT, MARKER
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess, run_squidd


def config_for(tmp: Path, **sections: dict[str, object]) -> Path:
    # No LLM is ever asked here; the URL only has to be valid.
    return write_daemon_config(
        tmp, "http://127.0.0.1:9/v1", api_key="sk-test-backup-cmd-01", **sections
    )


def test_create_verify_restore_and_refusals(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    data = tmp_path / "data"
    (data / "sessions").mkdir(parents=True)
    (data / "sessions" / "s.jsonl").write_text('{"role":"user","content":"hi"}\n')
    archive = tmp_path / "out" / "b.tar.gz"
    made = run_squidd(config, "backup", "create", str(archive), "--verify")
    assert made.returncode == 0, made.stderr
    assert "verified" in made.stdout and "secrets left out" in made.stdout
    checked = run_squidd(config, "backup", "verify", str(archive))
    assert checked.returncode == 0 and "is whole: 1 files" in checked.stdout

    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(archive.read_bytes()[:-40])
    bad = run_squidd(config, "backup", "verify", str(damaged))
    assert bad.returncode == 1
    assert str(damaged) in bad.stderr and len(bad.stderr.splitlines()) == 1

    refused = run_squidd(config, "backup", "restore", str(archive), "--target", str(data))
    assert refused.returncode == 1 and "not empty" in refused.stderr
    target = tmp_path / "restored"
    restored = run_squidd(config, "backup", "restore", str(archive), "--target", str(target))
    assert restored.returncode == 0, restored.stderr
    assert (target / "sessions" / "s.jsonl").read_text() == '{"role":"user","content":"hi"}\n'


def test_every_declared_secret_is_left_out_unless_asked_for(tmp_path: Path) -> None:
    """The Matrix account's token and keys, its cross-signing identity and recovery key,
    and the API's keys file stay out of a backup made without --include-secrets."""
    config = config_for(tmp_path)
    data = tmp_path / "data"
    secret = {
        "matrix/credentials.json": '{"access_token": "syt_secret"}',
        "matrix/store/bot.db": "olm keys",
        "matrix/identity.json": '{"master": "private"}',
        "matrix/recovery-key.txt": "EsT0 recovery",
        "api/keys": "sk-api-key-that-is-secret\n",
    }
    for name, text in {**secret, "sessions/s.jsonl": "{}\n", "matrix/sync.json": "{}"}.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(text)
    plain, full = tmp_path / "plain.tar.gz", tmp_path / "full.tar.gz"
    assert run_squidd(config, "backup", "create", str(plain)).returncode == 0
    made = run_squidd(config, "backup", "create", str(full), "--include-secrets")
    assert made.returncode == 0, made.stderr
    for archive, kept in ((plain, set()), (full, set(secret))):
        target = tmp_path / f"restored-{archive.stem}"
        restored = run_squidd(config, "backup", "restore", str(archive), "--target", str(target))
        assert restored.returncode == 0, restored.stderr
        found = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
        assert {"sessions/s.jsonl", "matrix/sync.json"} <= found
        assert found & set(secret) == kept


def test_create_without_a_file_names_it_in_the_backup_dir(tmp_path: Path) -> None:
    config = config_for(tmp_path, backup={"dir": str(tmp_path / "kept")})
    (tmp_path / "data").mkdir()
    made = run_squidd(config, "backup", "create")
    assert made.returncode == 0, made.stderr
    [archive] = (tmp_path / "kept").glob("*.tar.gz")
    assert archive.name.startswith("squidd-backup-") and archive.name.endswith(".tar.gz")


def test_run_refuses_a_newer_data_dir_with_one_line_and_exit_2(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / MARKER).write_text(json.dumps({"format": CURRENT + 1, "squidd": "9.9.9"}))
    done = run_squidd(config, "run")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("config:")]
    assert len(lines) == 1
    assert f"holds data format {CURRENT + 1}" in lines[0]
    for command in (
        ["chat", "-m", "hi"],
        ["cron", "add", "--name", "n", "--prompt", "p", "--every", "1d"],
    ):
        other = run_squidd(config, *command)
        assert other.returncode != 0
        assert len(other.stderr.splitlines()) == 1, other.stderr
        assert f"holds data format {CURRENT + 1}" in other.stderr
    assert sorted(p.name for p in data.iterdir()) == [MARKER]


@pytest.mark.anyio
async def test_run_migrates_a_format_1_data_dir_after_a_backup(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    data = tmp_path / "data"
    (data / "sessions").mkdir(parents=True)
    history = data / "sessions" / "s.jsonl"
    history.write_text('{"role":"user","content":"hi"}\n')
    history.chmod(0o644)
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    try:
        await daemon.wait_event("daemon_ready")
        assert await daemon.stop() == 0
    finally:
        daemon.kill()
    assert daemon.count("data_dir_backed_up") == 1
    [migrated] = [e for e in daemon.events() if e["event"] == "data_dir_migrated"]
    assert migrated["to"] == CURRENT
    assert json.loads((data / MARKER).read_text())["format"] == CURRENT
    assert oct(history.stat().st_mode & 0o777) == "0o600"
    [backup] = (data / "backups").iterdir()
    assert run_squidd(config, "backup", "verify", str(backup)).returncode == 0


def test_create_writes_outside_the_data_dir_with_the_config_beside(tmp_path: Path) -> None:
    """No FILE: the archive lands in ~/squidd-backups, not in the data dir it backs up; the
    config is copied beside it, its secret values left out unless asked for; a missing
    archive is "cannot read", never "damaged"."""
    import subprocess

    from tests.support.daemon import daemon_env, squidd_argv

    config = config_for(tmp_path)
    (tmp_path / "data").mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()

    def squidd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            squidd_argv(config, *args),
            env=daemon_env(HOME=str(home)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    made = squidd("backup", "create")
    assert made.returncode == 0, made.stderr
    [archive] = (home / "squidd-backups").glob("*.tar.gz")
    assert not (tmp_path / "data" / "backups").exists()
    copy = archive.with_name(f"{archive.name}.config.toml")
    assert "sk-test-backup-cmd-01" not in copy.read_text()
    assert 'api_key = ""  # left out of the backup' in copy.read_text()
    assert oct(copy.stat().st_mode & 0o777) == "0o600"
    assert "1 secret value(s) left out" in made.stdout and "secrets left out" in made.stdout

    kept = squidd("backup", "create", str(tmp_path / "with.tar.gz"), "--include-secrets")
    assert kept.returncode == 0, kept.stderr
    assert "sk-test-backup-cmd-01" in (tmp_path / "with.tar.gz.config.toml").read_text()

    missing = squidd("backup", "verify", str(tmp_path / "nowhere.tar.gz"))
    assert missing.returncode == 1
    assert "cannot read it: No such file or directory" in missing.stderr
    assert "damaged" not in missing.stderr
