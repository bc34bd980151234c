"""Host side of csrc/fastdiv.cuh: magic numbers that let a kernel divide by a runtime int with
a multiply-high, and the 32-bit index limit that the pool and LRN kernels rely on.

A kernel that decodes a flat index into (plane, row, column) would otherwise divide by the row
length per element; the divisor is known on the host, so its magic is computed here once per
launch and passed as one ``unsigned long long`` (magic in the low 32 bits, shift above).
"""
from __future__ import annotations

from collections.abc import Iterator

__all__ = ["MAX_INDEX", "magic", "fast_divide", "chunks"]

MAX_INDEX = 2**31 - 1
"""The most elements one launch of a 32-bit-index kernel may cover (a flat index is < 2^31, which
is also what makes the magic division exact). Larger tensors are launched in chunks."""


def magic(d: int) -> int:
    """The packed magic of divisor ``d`` (1 <= d <= 2^31 - 1): ``magic | shift << 32``."""
    d = int(d)
    if not 1 <= d <= MAX_INDEX:
        raise ValueError(f"fast division: divisor {d} is outside [1, 2^31 - 1]")
    shift = (d - 1).bit_length()  # ceil(log2 d): the least s with 2^s >= d
    m = ((1 << 32) * ((1 << shift) - d)) // d + 1
    assert 0 < m < (1 << 32), (d, m)
    return m | (shift << 32)


def fast_divide(n: int, packed: int) -> int:
    """What the kernel computes from ``packed``: n // d for 0 <= n < 2^31 (tests check it)."""
    m, shift = packed & 0xFFFFFFFF, packed >> 32
    return (((n * m) >> 32) + n) >> shift


def chunks(count: int, unit: int, limit: int | None = None) -> Iterator[tuple[int, int]]:
    """Split ``count`` units of ``unit`` elements each into runs [a, b) of at most ``limit``
    elements (``MAX_INDEX`` by default), so every launch indexes in 32 bits."""
    limit = MAX_INDEX if limit is None else limit
    if unit > limit:
        raise ValueError(f"a single plane of {unit} elements exceeds the 32-bit index limit of one "
                         f"launch ({limit}); split the input along its spatial axes")
    per = max(1, limit // max(unit, 1))
    for start in range(0, count, per):
        yield start, min(count, start + per)
