"""Vectors kept as plain arrays and searched without numpy (not in the lock): a packed
integer scan picks candidates, float32 rows rank them exactly.

Each vector is stored twice, row by row: as float32 (unit length) and quantised to one byte
a dimension (`round(x * 127) + 128`). For a search the bytes of each dimension are laid out
as one Python integer with a 32-bit slot per row; the query, quantised to -127..127, is
then `sum(q_d * column_d)`: about one big-integer multiply and add per dimension, each a
C loop over all rows at once, instead of a Python loop over rows (a pure-Python exact dot
product over 100,000 rows of 64 dimensions takes about 330 ms on this machine; this scan
about 30 ms, bench/bench_recall.py). A constant bias keeps every slot positive, so no
borrow crosses slots; rows outside the searcher's scope are masked to 0. The best
`candidates` rows by that score are then scored exactly with their float32 rows, read from
the file, and the best `k` of those are the answer. The quantised score differs from the
exact one by well under one percent of the scale, so the exact top `k` is found among a few
hundred candidates (the bench checks it against a full exact scan).

Memory: 1 byte (the quantised row) + 3 or 4 bytes (the packed columns) per dimension per
vector in memory, the float32 rows on disk: 100,000 vectors of 384 dimensions are 192 MB. Past that
a vector extension or numpy is the better tool (docs/architecture.md).
"""

from __future__ import annotations

import array
import heapq
import itertools
import math
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["PackedVectors", "quantise", "unit"]

_MAX_PRODUCT = 127 * 255  # the largest |q_d * v_d|


def slot_bytes(dim: int) -> int:
    """Bytes per row in a packed column: 3 while a score's range fits in 22 bits (up to 129
    dimensions), else 4: fewer bytes are proportionally less work for every search."""
    return 3 if _MAX_PRODUCT * dim < 1 << 22 else 4


def unit(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to length 1 (a zero vector stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else [0.0 for _ in vector]


def quantise(vector: Sequence[float]) -> bytes:
    """A unit vector as one byte a dimension, 1..255."""
    return bytes(max(1, min(255, round(x * 127) + 128)) for x in vector)


class PackedVectors:
    """The quantised rows of one float32 file, searchable (see the module). Not thread-safe:
    its owner serialises appends and searches."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._slot = slot_bytes(dim)
        # Unmasked slots lie within bias ± 127*255*dim: far from 0 and from the top bit.
        self._bias_value = 1 << (8 * self._slot - 2)
        self._rows = bytearray()  # quantised, row after row
        self._columns: list[int] = [0] * dim
        self._packed = 0  # rows already in `_columns`
        self._bias = 0
        self._ones = 0  # 1 in every slot
        self._masks: dict[tuple[int, bytes], int] = {}

    @property
    def count(self) -> int:
        return len(self._rows) // self.dim

    def extend(self, quantised_rows: bytes) -> None:
        if len(quantised_rows) % self.dim:
            raise ValueError("quantised rows are not whole rows")
        self._rows += quantised_rows

    def truncate(self, rows: int) -> None:
        del self._rows[rows * self.dim :]
        self._columns, self._packed, self._masks = [0] * self.dim, 0, {}

    def _pack(self) -> None:
        """Bring the packed columns up to every row (only the rows added since)."""
        start, count, dim = self._packed, self.count, self.dim
        if start == count:
            return
        fresh = self._rows[start * dim :]
        width = self._slot
        slots = bytearray(width * (count - start))
        shift = 8 * width * start
        for d in range(dim):
            slots[0::width] = fresh[d::dim]
            self._columns[d] |= int.from_bytes(slots, "little") << shift
        self._ones = int.from_bytes((1).to_bytes(width, "little") * count, "little")
        self._bias = self._bias_value * self._ones
        self._packed = count

    def _mask(self, allowed: bytes) -> int:
        """`allowed` holds one byte per row (1: in scope) → a mask of whole slots."""
        key = (self.count, allowed)
        if key not in self._masks:
            flags = allowed.replace(b"\x01", b"\xff")
            slots = bytearray(self._slot * len(flags))
            for offset in range(self._slot):
                slots[offset :: self._slot] = flags
            self._masks = {key: int.from_bytes(slots, "little")}  # the latest scope only
        return self._masks[key]

    def candidates(self, query: Sequence[float], limit: int, allowed: bytes | None) -> list[int]:
        """The `limit` rows with the best quantised scores (ties at the last place: the
        first ones), in no order; rows masked out by `allowed` never."""
        self._pack()
        count = self.count
        if count == 0:
            return []
        plus, minus = 0, 0
        for weight, column in zip((round(x * 127) for x in query), self._columns, strict=True):
            if weight > 0:
                plus += weight * column
            elif weight < 0:
                minus += -weight * column
        total = plus + self._bias - minus
        if allowed is not None:
            total &= self._mask(allowed)
        scores = self._scores(total, count)
        quick = self._above_sampled_floor(total, scores, limit)
        if quick is not None:
            return quick
        best = heapq.nlargest(limit, scores)
        floor = max(best[-1], 1) if best else 1
        # Every row above the floor, then as many of the rows at it as fit (ties).
        above = list(itertools.compress(range(count), map(floor.__lt__, scores)))
        at = itertools.compress(range(count), map(floor.__eq__, scores))
        return above + list(itertools.islice(at, max(0, limit - len(above))))

    def _scores(self, total: int, count: int) -> array.array[int]:
        """Each slot of `total` as an unsigned int."""
        raw = total.to_bytes(self._slot * count, "little")
        if self._slot == 3:
            wide = bytearray(4 * count)
            for offset in range(3):
                wide[offset::4] = raw[offset::3]
            raw = bytes(wide)
        scores = array.array("I")
        scores.frombytes(raw)
        return scores

    def _above_sampled_floor(
        self, total: int, scores: array.array[int], limit: int
    ) -> list[int] | None:
        """The best `limit` rows found through a floor taken from every 16th score; the
        rows at or above it are read off bit 31 of `total + (2**31 - floor)` in each slot
        (no Python loop over the rows). None when the floor let through too few rows or
        too many (ties), and the caller takes the full way."""
        sample = scores[::16]
        if len(sample) < 4 * limit // 16 + 8:
            return None
        floor = heapq.nlargest(max(1, limit // 16), sample)[-1]
        if floor < self._bias_value // 2:  # masked rows (0) reached the sample's best
            return None
        top = 8 * self._slot - 1  # the slot's top bit: set where score + (2**top - floor) ≥ 2**top
        flags = (((total + ((1 << top) - floor) * self._ones) >> top) & self._ones).to_bytes(
            self._slot * len(scores), "little"
        )
        rows = list(itertools.compress(range(len(scores)), flags[:: self._slot]))
        if not limit <= len(rows) <= 16 * limit:
            return None
        return heapq.nlargest(limit, rows, key=scores.__getitem__)


def exact_scores(path: Path, dim: int, query: Sequence[float], rows: Sequence[int]) -> list[float]:
    """The exact dot product of `query` with each of `rows` of a float32 file."""
    size = 4 * dim
    scores: list[float] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for row in rows:
            values = array.array("f")
            values.frombytes(os.pread(fd, size, row * size))
            scores.append(sum(map(float.__mul__, query, values)))
    finally:
        os.close(fd)
    return scores
