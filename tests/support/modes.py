"""Private modes under a permissive umask: the fixture that opens the umask for one test
(children inherit it: theirs is 000 unless squidd sets its own) and the check that lists
what is not owner-only."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Umask 000 for the test (everyone may read what is made), put back after it."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def loose_modes(root: Path, *, skip: str = "") -> list[str]:
    """Everything under `root` (itself included) whose mode is not 0700 (dir) / 0600 (file),
    named from `root`'s parent; the top-level entry `skip` is passed over."""
    found: list[str] = []
    for path in [root, *root.rglob("*")]:
        if skip and path.relative_to(root).parts[:1] == (skip,):
            continue
        info = path.lstat()
        want = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if stat.S_IMODE(info.st_mode) != want:
            found.append(f"{path.relative_to(root.parent)} {oct(stat.S_IMODE(info.st_mode))}")
    return found
