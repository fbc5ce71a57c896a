"""The searches behind ``optimal``: the contiguous partition of the readiness order whose last
collective ends first, for a collective's time ``T`` as a function of its bytes.

Gradients ``1..n`` in readiness order are ready at ``R_1 <= ... <= R_n``; ``S`` are the
prefix sums of their bytes. A bucket ``(i, j]`` is ready at ``R_j`` and, on the one channel,
starts at ``max(R_j, F_i)``, ``F_i`` being when the bucket before it ended (``F_0 = 0``)::

    F_j = min over i of  max(R_j, F_i) + T(S_j - S_i)                        (1)

over the ``i`` whose bucket respects the cap (one gradient alone may exceed it) and reaches
back past no gradient that travels alone. The term is non-decreasing in ``F_i``, so a best
partition of the first ``j`` gradients extends a best partition of the first ``i``: (1) is
exact for ANY ``T`` (:func:`scan_partition` evaluates it whole, O(n·window)).

Where ``T`` is non-decreasing (monotone) and at least 0, ``F`` is non-decreasing too (take a
best partition of ``j+1`` gradients, last bucket ``(i, j+1]``: ``(i, j]`` ends no later, or
``i = j`` and ``F_{j+1} >= F_j``). So with ``k`` the largest ``i`` with ``F_i <= R_j``:

- ``i <= k``: the term is ``R_j + T(S_j - S_i)``, least at ``i = k`` (the fewest bytes);
- ``i > k``: the term is ``F_i + T(S_j - S_i) >= F_{k+1} + T(S_j - S_i)``. Scanning ``i``
  down from ``j - 1`` the bytes only grow, so the scan stops once ``F_{k+1} + T(bytes)``
  reaches the best term so far; a candidate whose ``F_i + T_low(bytes)`` reaches it is
  passed without evaluating ``T`` (``T_low``: ``T`` at a grid point at or below the bytes,
  32 a doubling: a lower bound, by monotonicity);
- where ``T`` is the line ``c + b·x`` from ``x*`` on (its tail), the candidates ``i > k``
  with ``S_j - S_i >= x*`` have the term ``(F_i - b·S_i) + c + b·S_j``: a window of ``i``
  whose ends only move right, whose minimum a monotone deque keeps, amortised O(1).

Where ``T`` is a line everywhere both regions are that one deque, and the search is O(n)
(:func:`line_partition`). :func:`curve_partition` is exact for every monotone ``T``; its
work is the near region: the candidates within ``x*`` bytes (and the cap) that the bounds
do not rule out.

A gradient that travels alone (a sparse one, all-gathered: ``alone``) is its own bucket,
``F_{s+1} = max(R_{s+1}, F_s) + T_alone(s)``, and no later bucket reaches back past it.
"""

from __future__ import annotations

import operator
from collections import deque
from itertools import accumulate, islice
from typing import Callable, Optional, Sequence

from ..costs.curve import Curve, LowerTable
from ..costs.model import Linear
from ..errors import PlanError

__all__ = ["line_partition", "curve_partition", "scan_partition", "window_work", "Searched"]

Searched = tuple[list[tuple[int, ...]], float]
"""Buckets (index tuples in launch order) and when the last one ends (``F_n``)."""


def _prefix(ready: Sequence[float], nbytes: Sequence[int]) -> list[int]:
    if any(map(operator.gt, ready, islice(ready, 1, None))):  # some b < a, a before b
        raise PlanError("gradient ready times must not decrease in readiness order")
    return list(accumulate(nbytes, initial=0))


def _buckets(parent: list[int], n: int) -> list[tuple[int, ...]]:
    out, j = [], n
    while j > 0:
        i = parent[j]
        out.append(tuple(range(i, j)))
        j = i
    return out[::-1]


class _Window:
    """The left end of the buckets ending at ``j``: the cap and the last lone gradient."""

    def __init__(self, prefix: list[int], cap: Optional[int]):
        self.prefix, self.cap, self.lo, self.barrier = prefix, cap, 0, 0

    def at(self, j: int) -> int:
        if self.cap is not None:
            prefix, cap, lo = self.prefix, self.cap, self.lo
            while lo < j - 1 and prefix[j] - prefix[lo] > cap:
                lo += 1
            self.lo = lo
        self.lo = max(self.lo, self.barrier)
        return self.lo


def line_partition(ready: Sequence[float], nbytes: Sequence[int], line: Linear,
                   cap: Optional[int] = None, alone: Optional[dict[int, float]] = None) -> Searched:
    """The best partition under the line ``T(x) = c + b·x`` (b >= 0), in O(n).

    >>> line_partition([1.0, 2.0, 6.0], [100, 100, 100], Linear(2.0, 0.01))[0]
    [(0, 1), (2,)]
    """
    alone = alone or {}
    c, b = line
    n = len(ready)
    prefix = _prefix(ready, nbytes)
    finish, parent = [0.0] * (n + 1), [0] * (n + 1)
    keys = [0.0] * (n + 1)  # finish[i] - b·prefix[i], once i is a candidate
    window: deque[int] = deque()  # i with increasing keys[i]
    k = 0  # the largest i with finish[i] <= ready (moves right only)
    lo = barrier = 0  # the window's left end (_Window.at, inline: this loop is the hot one)
    for j in range(1, n + 1):
        r, s_j = ready[j - 1], prefix[j]
        key_new = keys[j - 1] = finish[j - 1] - b * prefix[j - 1]
        while window and keys[window[-1]] >= key_new:
            window.pop()
        window.append(j - 1)
        if cap is not None:
            while lo < j - 1 and s_j - prefix[lo] > cap:
                lo += 1
        if lo < barrier:
            lo = barrier
        while k + 1 <= j - 1 and finish[k + 1] <= r:
            k += 1
        if alone and j - 1 in alone:
            finish[j], parent[j] = max(r, finish[j - 1]) + alone[j - 1], j - 1
            barrier = j
            continue
        best, best_i = float("inf"), -1
        if k >= lo:
            best, best_i = r + c + b * (s_j - prefix[k]), k
        left = lo if lo > k else k + 1
        while window and window[0] < left:
            window.popleft()
        if window:
            i = window[0]
            value = keys[i] + c + b * s_j
            if value < best or (value == best and i > best_i):
                best, best_i = value, i
        finish[j], parent[j] = best, best_i
    return (_buckets(parent, n), finish[n]) if n else ([], 0.0)


class _Tail:
    """The candidates at least ``x*`` bytes back, where the curve is the line ``c + b·x``:
    their terms are ``(F_i - b·S_i) + c + b·S_j``, so a monotone deque over a window whose
    ends only move right keeps their minimum."""

    def __init__(self, curve: Curve, finish: list[float], prefix: list[int]):
        self.x, (self.c, self.b) = curve.tail if curve.tail is not None else (None, Linear(0.0, 0.0))
        self.finish, self.prefix, self.window, self.pushed = finish, prefix, deque(), 0

    def best(self, j: int, s_j: int, left: int) -> tuple[float, int, int]:
        """``(term, i)`` of the best tail candidate from ``left`` (``inf`` if none), and the
        first candidate that is not in the tail."""
        if self.x is None:
            return float("inf"), -1, 0
        finish, prefix, b, window = self.finish, self.prefix, self.b, self.window
        while self.pushed <= j - 1 and s_j - prefix[self.pushed] >= self.x:
            i = self.pushed
            key = finish[i] - b * prefix[i]
            while window and finish[window[-1]] - b * prefix[window[-1]] >= key:
                window.pop()
            window.append(i)
            self.pushed += 1
        while window and window[0] < left:
            window.popleft()
        if not window:
            return float("inf"), -1, self.pushed
        i = window[0]
        return finish[i] - b * prefix[i] + self.c + b * s_j, i, self.pushed


def _near(finish, prefix, s_j: int, first: int, j: int, f_least: float, best: float, best_i: int,
          time, lower: LowerTable) -> tuple[float, int]:
    """The candidates ``first..j-1`` (fewer than ``x*`` bytes back, past ``k``): the farthest
    first (in a backlog the fewest buckets often wins, and a good bound early rules out the
    rest), then down from the nearest while the bound ``F_{k+1} + T_low(bytes)`` can still
    win; a candidate whose ``F_i + T_low(bytes)`` cannot is passed without evaluating ``T``."""
    value = finish[first] + time(s_j - prefix[first])
    if value < best:
        best, best_i = value, first
    lows = lower.values
    for i in range(j - 1, first, -1):
        x = s_j - prefix[i]
        if x >= 64:  # lower(x), inline: the time at the grid point at or below x
            e = x.bit_length() - 6
            low = lows.get((e << 5) | ((x >> e) & 31))
            if low is None:
                low = lower(x)
        else:
            low = lower(x)
        if f_least + low >= best:
            break
        f = finish[i]
        if f + low < best:
            value = f + time(x)
            if value < best:
                best, best_i = value, i
    return best, best_i


def curve_partition(ready: Sequence[float], nbytes: Sequence[int], curve: Curve,
                    cap: Optional[int] = None, alone: Optional[dict[int, float]] = None) -> Searched:
    """The best partition under a MONOTONE curve (exact; see the module's docstring). On a
    curve that is not monotone it is a partition the bounds may have cut short of the best.

    >>> from ..costs.curve import line_curve
    >>> steps = lambda x: 2.0 if x <= 100 else 2.5 if x <= 200 else 9.0
    >>> curve = line_curve(Linear(2.0, 0.0))._replace(time=steps, line=None, tail=None)
    >>> curve_partition([0.0, 0.0, 3.0], [100, 100, 100], curve)
    ([(0, 1), (2,)], 5.0)
    """
    if curve.line is not None and curve.line.ms_per_byte >= 0:
        return line_partition(ready, nbytes, curve.line, cap, alone)
    alone = alone or {}
    n = len(ready)
    prefix = _prefix(ready, nbytes)
    finish, parent = [0.0] * (n + 1), [0] * (n + 1)
    time, lower = curve.time, LowerTable(curve.time)
    tail = _Tail(curve, finish, prefix)
    k, bounds = 0, _Window(prefix, cap)
    for j in range(1, n + 1):
        r, s_j = ready[j - 1], prefix[j]
        lo = bounds.at(j)
        while k + 1 <= j - 1 and finish[k + 1] <= r:
            k += 1
        if j - 1 in alone:
            finish[j], parent[j] = max(r, finish[j - 1]) + alone[j - 1], j - 1
            bounds.barrier = j
            continue
        best, best_i = (r + time(s_j - prefix[k]), k) if k >= lo else (float("inf"), -1)
        left = max(lo, k + 1)
        value, i, pushed = tail.best(j, s_j, left)
        if value < best:
            best, best_i = value, i
        first = max(left, pushed)
        if first <= j - 1:
            best, best_i = _near(finish, prefix, s_j, first, j, finish[left], best, best_i,
                                 time, lower)
        finish[j], parent[j] = best, best_i
    return (_buckets(parent, n), finish[n]) if n else ([], 0.0)


def window_work(ready: Sequence[float], nbytes: Sequence[int], cap: Optional[int] = None,
                alone: Optional[dict[int, float]] = None) -> int:
    """How many (i, j) terms :func:`scan_partition` evaluates: the sum of the windows."""
    alone = alone or {}
    prefix = _prefix(ready, nbytes)
    lo = barrier = work = 0  # _Window.at, inline (a pass over every gradient)
    for j in range(1, len(ready) + 1):
        if alone and j - 1 in alone:
            barrier = j
            work += 1
            continue
        if cap is not None:
            s_j = prefix[j]
            while lo < j - 1 and s_j - prefix[lo] > cap:
                lo += 1
        if lo < barrier:
            lo = barrier
        work += j - lo
    return work


def scan_partition(ready: Sequence[float], nbytes: Sequence[int], time: Callable[[float], float],
                   cap: Optional[int] = None, alone: Optional[dict[int, float]] = None) -> Searched:
    """(1) evaluated over every candidate: exact for any curve, O(sum of the windows).

    A curve that dips (600 bytes cost less than 500):

    >>> dip = lambda x: {0: 0.0, 100: 1.0, 200: 1.5, 300: 0.8}.get(x, 3.0)
    >>> scan_partition([0.0, 0.0, 0.0], [100, 100, 100], dip)
    ([(0, 1, 2)], 0.8)
    """
    alone = alone or {}
    n = len(ready)
    prefix = _prefix(ready, nbytes)
    finish, parent = [0.0] * (n + 1), [0] * (n + 1)
    bounds = _Window(prefix, cap)
    for j in range(1, n + 1):
        r, s_j = ready[j - 1], prefix[j]
        lo = bounds.at(j)
        if j - 1 in alone:
            finish[j], parent[j] = max(r, finish[j - 1]) + alone[j - 1], j - 1
            bounds.barrier = j
            continue
        best, best_i = float("inf"), -1
        for i in range(j - 1, lo - 1, -1):
            f = finish[i]
            value = (f if f > r else r) + time(s_j - prefix[i])
            if value < best:
                best, best_i = value, i
        finish[j], parent[j] = best, best_i
    return (_buckets(parent, n), finish[n]) if n else ([], 0.0)
