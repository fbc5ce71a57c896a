"""A cost model's time of one collective kind as a function of the bucket's bytes: what the
optimal search needs to know of it to be exact.

``time(n)`` is the model's own ``time_ms`` (the search and the timeline add the same
numbers). ``monotone``: never less time for more bytes (the search's pruning rests on it).
``line``: the curve is exactly this line (the O(n) search applies). ``tail``: from that size
on the curve is exactly that line (the search takes candidates past it from a sliding-window
minimum instead of one by one). ``minorant``: a line at or below ``time(n)`` for every
``n >= 0`` (a lower bound on any plan, where the search cannot be exact). ``queued``: the curve
of a collective started right behind another, where the model answers it differently
(``None``: the same times).

>>> c = line_curve(Linear(0.5, 0.001))
>>> c.time(1000), c.monotone, c.line == c.minorant
(1.5, True, True)
>>> lower = LowerTable(c.time)   # a cheap bound: the time at a size at or below n
>>> 0.5 < lower(70_000) <= c.time(70_000), lower(70_000) == c.time(69_632)
(True, True)
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from .model import Linear

__all__ = ["Curve", "line_curve", "LowerTable"]

_STEPS = 5  # grid points per octave of the lower table: 2^5 = 32 (3% apart)


class LowerTable:
    """``lower(n)``: the curve's time at the grid point at or below ``n`` (32 a doubling),
    computed once per point; for a monotone curve a lower bound of ``time(m)`` for every
    ``m >= n``, at the cost of a few integer operations."""

    __slots__ = ("time", "values")

    def __init__(self, time: Callable[[float], float]):
        self.time = time
        self.values: dict[int, float] = {}

    def __call__(self, n: int) -> float:
        if n < 64:
            key = -1 - n if n > 0 else -1
            point = max(n, 0)
        else:
            e = n.bit_length() - 1 - _STEPS
            key = (e << _STEPS) | ((n >> e) & ((1 << _STEPS) - 1))
            point = (n >> e) << e
        value = self.values.get(key)
        if value is None:
            value = self.values[key] = self.time(point)
        return value


class Curve(NamedTuple):
    time: Callable[[float], float]
    monotone: bool
    minorant: Linear
    line: Optional[Linear] = None
    tail: Optional[tuple[int, Linear]] = None  # (from bytes, the line there)
    queued: Optional["Curve"] = None


def line_curve(line: Linear, queued: Optional[Curve] = None) -> Curve:
    """The curve that is ``line`` (slope >= 0: monotone)."""
    return Curve(line.at, line.ms_per_byte >= 0, line, line, (0, line), queued)
