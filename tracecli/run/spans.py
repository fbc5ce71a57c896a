"""Time covered by sets of spans: what a rank's step spent computing, in collectives, or both.

>>> merged([(0, 2), (1, 3), (5, 6)])
[(0, 3), (5, 6)]
>>> covered([(0, 2), (1, 3), (5, 6)]), overlap([(0, 3)], [(2, 6)])
(4, 1.0)
"""

from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["merged", "covered", "overlap", "covered_within"]


def merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``spans`` as disjoint spans in order (empty spans dropped)."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def covered(spans: Iterable[tuple[float, float]]) -> float:
    """The time ``spans`` cover, overlaps once."""
    return sum(b - a for a, b in merged(spans))


def covered_within(spans: Iterable[tuple[float, float]], lo: float, hi: float) -> float:
    """The time within ``[lo, hi]`` that ``spans`` cover."""
    return covered((max(a, lo), min(b, hi)) for a, b in spans)


def overlap(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """The time both unions cover (each side merged first)."""
    x, y = merged(a), merged(b)
    i = j = 0
    total = 0.0
    while i < len(x) and j < len(y):
        lo, hi = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if hi > lo:
            total += hi - lo
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total
