"""The core imports no adapter: `squidd.core` must not depend on llm, store, channels, tools,
config or the composition root, directly or through anything it imports."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "src" / "squidd" / "core"
FORBIDDEN = (
    "squidd.llm",
    "squidd.store",
    "squidd.channels",
    "squidd.tools",
    "squidd.app",
    "squidd.runtime",
    "squidd.config",
    "openai",
    "nio",
    "aioimaplib",
    "aiosmtplib",
)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_core_imports_no_adapter() -> None:
    offenders = {
        f"{path.name}: {module}"
        for path in CORE.rglob("*.py")
        for module in imported_modules(path)
        if any(module == f or module.startswith(f + ".") for f in FORBIDDEN)
    }
    assert offenders == set()


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from squidd.store.jsonl import JsonlStore\nimport openai\n")
    assert {"squidd.store.jsonl", "openai"} <= imported_modules(bad)
