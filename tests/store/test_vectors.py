"""The packed integer scan of store/vectors.py against a plain exact scan: the same best
rows, for both slot widths, with and without a scope mask (a masked row never comes back)."""

from __future__ import annotations

import array
import random
from pathlib import Path

import pytest

from squidd.store.vectors import PackedVectors, exact_scores, quantise, slot_bytes, unit


def _rows(rng: random.Random, count: int, dim: int) -> list[list[float]]:
    return [unit([rng.gauss(0, 1) for _ in range(dim)]) for _ in range(count)]


@pytest.mark.parametrize("dim", [48, 200])
@pytest.mark.parametrize("masked", [False, True])
def test_the_packed_scan_finds_the_exact_best_rows(tmp_path: Path, dim: int, masked: bool) -> None:
    rng = random.Random(dim)  # noqa: S311 - a repeatable test draw
    rows = _rows(rng, 6000, dim)
    f32 = tmp_path / "rows.f32"
    f32.write_bytes(b"".join(array.array("f", r).tobytes() for r in rows))
    packed = PackedVectors(dim)
    for start in range(0, len(rows), 1000):  # appended in batches, as the indexer does
        packed.extend(b"".join(quantise(r) for r in rows[start : start + 1000]))
    allowed = bytes(rng.choice((0, 1)) for _ in rows) if masked else None
    for _ in range(5):
        query = unit([rng.gauss(0, 1) for _ in range(dim)])
        found = packed.candidates(query, 200, allowed)
        assert len(found) == 200
        scores = exact_scores(f32, dim, query, found)
        got = sorted(zip(scores, found, strict=True), reverse=True)[:10]
        exact = [sum(a * b for a, b in zip(query, row, strict=True)) for row in rows]
        pool = [i for i in range(len(rows)) if allowed is None or allowed[i]]
        want = sorted(pool, key=lambda i: -exact[i])[:10]
        assert [i for _, i in got] == want
        if allowed is not None:
            assert all(allowed[i] for i in found)


def test_slot_width_follows_the_dimension() -> None:
    assert slot_bytes(64) == 3
    assert slot_bytes(384) == 4


def test_a_scope_with_no_row_finds_none() -> None:
    packed = PackedVectors(8)
    packed.extend(b"".join(quantise(unit([1.0] * 8)) for _ in range(50)))
    assert packed.candidates(unit([1.0] * 8), 10, bytes(50)) == []
