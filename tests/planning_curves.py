"""A cost model whose all-reduce time is any function of the bytes (tests only), random
curves for hypothesis, and the brute-force optimum over every contiguous partition."""

from __future__ import annotations

import itertools
from typing import Callable, Optional

from hypothesis import strategies as st

from tracecli.costs import Linear
from tracecli.costs.curve import Curve
from tracecli.model import CollectiveKind
from tracecli.planning.base import Grad, Grouping
from tracecli.planning.timeline import simulate


class CurveModel:
    """All-reduce takes ``alone(n)`` ms (``queued(n)`` behind another, where given); other
    kinds the alone curve too. ``monotone`` is what the curve claims of itself."""

    name = "curve"
    source = "a test curve"

    def __init__(self, alone: Callable[[float], float], queued: Optional[Callable] = None,
                 monotone: bool = True, floor: float = 0.0, gpus: int = 2):
        self.alone, self.queued, self.monotone, self.floor, self._gpus = \
            alone, queued, monotone, floor, gpus

    @property
    def gpus(self) -> int:
        return self._gpus

    def time_ms(self, kind, nbytes, queued=False):
        return (self.queued if queued and self.queued else self.alone)(nbytes)

    def linear(self, kind):
        a = self.alone(0)
        return Linear(a, max(self.alone(1 << 20) - a, 0.0) / (1 << 20))

    def curve(self, kind):
        floor = Linear(self.floor, 0.0)
        queued = Curve(self.queued, self.monotone, floor) if self.queued else None
        return Curve(self.alone, self.monotone, floor, queued=queued)

    def basis(self, kind, nbytes):
        return None

    def algorithm_protocol(self, kind, nbytes):
        return None

    def error(self, kind, nbytes):
        return None

    def summary(self):
        return self.source

    def describe(self):
        return {"name": self.name}

    def on(self, gpus):
        return self


def step_curve(points, slope: float, base: float):
    """``base + slope·n`` plus each step ``(at, rise)`` once ``n >= at``: monotone."""
    def time(n):
        return base + slope * n + sum(rise for at, rise in points if n >= at)
    return time


@st.composite
def monotone_curves(draw):
    steps = draw(st.lists(st.tuples(st.integers(1, 12_000), st.floats(0, 4)), max_size=5))
    return step_curve(steps, draw(st.sampled_from([0.0, 1e-4, 1e-3])), draw(st.floats(0, 2)))


@st.composite
def bumpy_curves(draw):
    """Any positive function of the bytes: a table by 500-byte bands, not monotone."""
    values = draw(st.lists(st.floats(0.1, 5), min_size=4, max_size=12))
    return lambda n: values[min(int(n) // 500, len(values) - 1)]


@st.composite
def gradients(draw, max_n=8):
    n = draw(st.integers(1, max_n))
    gaps = draw(st.lists(st.floats(0, 4, allow_nan=False), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n))
    ready, clock = [], draw(st.floats(0, 2))
    for gap in gaps:
        clock += gap
        ready.append(clock)
    return tuple(Grad(f"g{i}", s, "float32", s // 4, r, i) for i, (s, r) in enumerate(zip(sizes, ready)))


def partitions(n):
    for cuts in itertools.product([False, True], repeat=n - 1):
        buckets, start = [], 0
        for i, cut in enumerate(cuts, 1):
            if cut:
                buckets.append(tuple(range(start, i)))
                start = i
        buckets.append(tuple(range(start, n)))
        yield buckets


def brute_force(grads, cost, backward_end, cap=None) -> float:
    """The least iteration of any contiguous partition (the cap as ``optimal`` reads it)."""
    best = None
    for buckets in partitions(len(grads)):
        if cap is not None and any(len(b) > 1 and sum(grads[i].nbytes for i in b) > cap
                                   for b in buckets):
            continue
        t = simulate(grads, Grouping(buckets), cost, 0.0, backward_end).iteration_ms
        best = t if best is None else min(best, t)
    return best


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


ALL_REDUCE = CollectiveKind.ALL_REDUCE
