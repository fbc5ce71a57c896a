"""How far a plan's predicted iteration may be from what a run of it measures, from the
cost model's error band at each of its buckets (:meth:`~tracecli.costs.CostModel.error`).

Each bucket's collective is given the fastest and then the slowest time its band allows
(a band of ``(predicted - measured) / measured`` in ``[low, high]`` allows a measurement from
``predicted / (1 + high)`` to ``predicted / (1 + low)``), and the step is scheduled again
(:func:`~.schedule.run`: the same ready times, the same channel). The plan's error is the
larger move of the iteration either way. A bucket whose error the model cannot bound makes
the plan's error unknown, and the model says why.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

from .schedule import Comm, Span, Step, run

__all__ = ["IterationError", "plan_error", "unknown_why"]


class IterationError(NamedTuple):
    """``ms``: how far the iteration may move (``None``: unknown); ``basis``: the band of
    the plan's longest collective, or why nothing bounds it."""

    ms: Optional[float]
    basis: str


def unknown_why(cost, kind, nbytes) -> str:
    """Why ``cost`` cannot bound its error at this kind and size (its own words)."""
    say = getattr(cost, "unknown_error", None)
    return say(kind, nbytes) if say is not None else "the model says nothing of its error"


def plan_error(plan) -> IterationError:
    """The error of ``plan``'s predicted iteration (measured plans: none to bound, 0)."""
    t, cost = plan.timeline, plan.cost
    if plan.measured or not t.buckets:
        return IterationError(0.0, "measured")
    bands = []
    for b in t.buckets:
        band = cost.error(b.collective, b.nbytes)
        if band is None:
            return IterationError(None, unknown_why(cost, b.collective, b.nbytes))
        bands.append(band)
    comms = [Comm(b.collective, b.nbytes, ready_ms=b.ready_ms) for b in t.buckets]
    ends = []
    for side in (0, 1):
        durations = {id(c): band.measured_ms(b.duration_ms)[side]
                     for c, b, band in zip(comms, t.buckets, bands)}
        if not all(math.isfinite(d) for d in durations.values()):
            return IterationError(None, "the model's error band reaches -100% (a time it may "
                                    "underestimate without bound)")
        step = Step((Span(t.backward_end_ms),), tuple(comms), t.update_ms)
        ends.append(run(step, lambda comm, queued: durations[id(comm)]).iteration_ms)
    longest = max(range(len(bands)), key=lambda k: t.buckets[k].duration_ms)
    band = bands[longest]
    return IterationError(max(t.iteration_ms - ends[0], ends[1] - t.iteration_ms, 0.0),
                      f"a collective's time {band.text()}: {band.basis}")
