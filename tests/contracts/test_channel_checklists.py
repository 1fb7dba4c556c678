"""Every channel folder carries a checklist (`checklist.toml`): what it does about
reconnects, permanent errors, size caps and redelivery, each with the tests that prove it.
Checked here: the file is there, has the four entries, and every test it names exists."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHANNELS = ROOT / "src" / "squidd" / "channels"
ENTRIES = ("reconnects", "permanent_errors", "size_caps", "redelivery")


def channel_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def functions_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def problems(folder: Path, root: Path = ROOT) -> list[str]:
    checklist = folder / "checklist.toml"
    if not checklist.exists():
        return [f"{folder.name}: no checklist.toml"]
    data = tomllib.loads(checklist.read_text(encoding="utf-8"))
    found: list[str] = []
    for entry in ENTRIES:
        item = data.get(entry)
        if not isinstance(item, dict):
            found.append(f"{folder.name}: no [{entry}]")
            continue
        if item.get("status") not in ("done", "exempt") or not str(item.get("what", "")).strip():
            found.append(f"{folder.name}: [{entry}] needs a status and what it does")
        tests = item.get("tests") or []
        if item.get("status") == "done" and not tests:
            found.append(f"{folder.name}: [{entry}] names no test")
        for test in tests:
            file, _, name = str(test).partition("::")
            path = root / file
            if not path.exists() or (name and name not in functions_in(path)):
                found.append(f"{folder.name}: [{entry}] names a missing test {test}")
    return found


@pytest.mark.parametrize("folder", channel_folders(CHANNELS), ids=lambda p: p.name)
def test_each_channel_has_a_complete_checklist(folder: Path) -> None:
    assert problems(folder) == []


def test_a_channel_without_or_with_a_bad_checklist_is_caught(tmp_path: Path) -> None:
    bare = tmp_path / "carrier_pigeon"
    bare.mkdir()
    assert problems(bare, tmp_path) == ["carrier_pigeon: no checklist.toml"]
    (bare / "checklist.toml").write_text(
        '[reconnects]\nstatus = "done"\nwhat = "retries"\ntests = ["tests/x.py::test_gone"]\n'
    )
    assert problems(bare, tmp_path) == [
        "carrier_pigeon: [reconnects] names a missing test tests/x.py::test_gone",
        "carrier_pigeon: no [permanent_errors]",
        "carrier_pigeon: no [size_caps]",
        "carrier_pigeon: no [redelivery]",
    ]
