"""The locks in requirements/ stay in step with pyproject.toml (scripts/lockcheck.py, offline).

The install scripts install only the locked versions, so a dependency added to pyproject.toml
without re-locking would be missing from every install: these tests show that the check
catches that and the other ways a lock drifts, and that the install scripts refuse a stale
lock before touching an environment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _copy_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(ROOT / "requirements", root / "requirements")
    shutil.copytree(ROOT / "scripts", root / "scripts")
    return root


def _check(root: Path, mode: str = "--check") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lockcheck.py"), mode, "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_committed_locks_are_in_step() -> None:
    result = _check(ROOT)
    assert result.returncode == 0, result.stderr
    assert _check(ROOT, "--stamps").returncode == 0


def test_a_dependency_added_without_relocking_fails(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    _edit(root / "pyproject.toml", '"anyio>=4.4",', '"anyio>=4.4",\n    "rich>=13",')

    result = _check(root)

    assert result.returncode == 1
    assert "requirements/run.txt: compiled from another pyproject.toml" in result.stderr
    assert "requirements/run.txt: rich (from 'rich>=13') is not pinned" in result.stderr
    assert "requirements/test.txt: rich (from 'rich>=13') is not pinned" in result.stderr
    assert "run scripts/lock" in result.stderr
    assert _check(root, "--stamps").returncode == 1


def test_a_test_dependency_added_without_relocking_fails(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    _edit(root / "pyproject.toml", '"pytest>=8.2",', '"pytest>=8.2",\n    "freezegun",')

    result = _check(root)

    assert result.returncode == 1
    assert "requirements/test.txt: freezegun (from 'freezegun') is not pinned" in result.stderr
    assert "run.txt: freezegun" not in result.stderr  # not a runtime dependency


def test_a_range_the_locked_version_leaves_fails(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    _edit(root / "pyproject.toml", '"anyio>=4.4",', '"anyio>=99",')

    result = _check(root)

    assert result.returncode == 1
    assert re.search(r"run\.txt: anyio==\S+ is outside 'anyio>=99'", result.stderr)


@pytest.mark.parametrize(
    "lock", ["requirements/run.txt", "requirements/test.txt", "requirements/install.in"]
)
def test_hand_edits_to_the_locks_fail(tmp_path: Path, lock: str) -> None:
    root = _copy_repo(tmp_path)
    path = root / lock
    if lock.endswith(".in"):
        # a new installer-side requirement is part of the spec like pyproject.toml's
        path.write_text(path.read_text() + "setuptools\n")
        expected = "setuptools (from 'setuptools') is not pinned"
    else:
        text = path.read_text()
        pinned = re.search(r"^anyio==(\S+) ", text, re.MULTILINE)
        assert pinned is not None
        path.write_text(text.replace(f"anyio=={pinned[1]} ", "anyio==3.0 ", 1))
        expected = "anyio==3.0 is outside 'anyio>=4.4'"

    result = _check(root)

    assert result.returncode == 1
    assert expected in result.stderr


def test_a_pin_without_hashes_fails(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    path = root / "requirements" / "test.txt"
    path.write_text(path.read_text() + "rich==13.0.0\n")

    result = _check(root)

    assert result.returncode == 1
    assert "requirements/test.txt: rich==13.0.0: not an exact pin with hashes" in result.stderr


def test_the_daemon_lock_must_hold_the_tested_versions(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    path = root / "requirements" / "run.txt"
    text = path.read_text()
    pinned = re.search(r"^structlog==(\S+) ", text, re.MULTILINE)
    assert pinned is not None
    path.write_text(text.replace(f"structlog=={pinned[1]} ", "structlog==99.0 ", 1))

    result = _check(root)

    assert result.returncode == 1
    assert f"structlog: run.txt pins 99.0, test.txt {pinned[1]}" in result.stderr


def test_reordering_and_comments_in_pyproject_need_no_relock(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    pyproject = root / "pyproject.toml"
    _edit(pyproject, '    "anyio>=4.4",\n', "")
    _edit(pyproject, '"tzdata>=2024.1",', '"tzdata>=2024.1",\n    # moved\n    "anyio>=4.4",')

    result = _check(root)

    assert result.returncode == 0, result.stderr


def test_the_install_scripts_refuse_a_stale_lock(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    _edit(root / "pyproject.toml", '"anyio>=4.4",', '"anyio>=4.4",\n    "rich>=13",')
    venv = tmp_path / "venv"

    result = subprocess.run(
        ["bash", "-c", 'source "$1/scripts/_env.sh" && ensure_venv test', "_", str(root)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SQUIDD_VENV": str(venv), "PYTHON": sys.executable},
    )

    assert result.returncode != 0
    assert "run scripts/lock" in result.stderr
    assert not venv.exists()  # refused before creating or changing an environment
