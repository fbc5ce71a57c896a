"""The optimal plan: the contiguous partition of the readiness order with the smallest
predicted iteration time under the cost model in use (DESIGN 4.3, 4.4).

The iteration is ``forward + max(backward end, F_n) + update``, ``F_n`` being when the last
bucket's collective ends, so the best partition is the one whose last collective ends first
(:mod:`.search` derives the searches and why each is exact). Which search a model gets
depends on the shape of its curve (:meth:`~tracecli.costs.CostModel.curve`):

- a line (the alpha-beta presets and fits): O(n), exact;
- a monotone curve, queued times the same (measured points, a trace's own times): exact,
  the work growing with the candidates its bounds cannot rule out;
- any other curve (NCCL's, which dips where NCCL adds a channel or switches protocol):
  every candidate evaluated, exact, where that is at most :data:`SCAN_BUDGET` terms;
- beyond that, or where a bucket queued behind another takes a different time than one
  started alone (a calibration that measured both: an end a little later can then make
  the next bucket faster, and no search over best ends is exact), the plan is the best of
  several searches, each timed by the real schedule, and carries a note with the bound it is
  within: the optimum under a curve at or below the model's everywhere (the lesser of its
  two curves, or its minorant line), which no plan beats.

MG-WFBP's merge rule is a heuristic for the same objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

from ..costs import CostModel, Linear
from ..costs.curve import Curve
from ..errors import PlanError
from ..model import CollectiveKind
from .base import Grad, Grouping, collectives_of, sparse_alone
from .search import curve_partition, line_partition, scan_partition, window_work
from .spec import MAX_BYTES, SPARSE_AS_DENSE, Options, StrategySpec

__all__ = ["optimal", "optimal_partition", "search", "Found", "SPEC", "OptimalOptions",
           "SCAN_BUDGET"]

SCAN_BUDGET = 50_000  # terms an exact search of a curve that is not monotone may evaluate
_TIE = 1e-9  # relative: a bound this close to the plan is the plan


@dataclass(frozen=True)
class OptimalOptions(Options):
    max_bytes: Optional[int] = MAX_BYTES.field()  # an optional cap on every bucket
    sparse_as_dense: bool = SPARSE_AS_DENSE.field()


class Found(NamedTuple):
    """A search's partition, when its last collective ends, and, where the search could not
    be exact, the lower bound no partition beats (``bound_ms``) with why (``why``)."""

    buckets: list[tuple[int, ...]]
    end_ms: float
    bound_ms: Optional[float] = None
    why: str = ""

    @property
    def exact(self) -> bool:
        return self.bound_ms is None or self.end_ms - self.bound_ms <= _TIE * max(1.0, abs(self.end_ms))


def optimal_partition(ready: Sequence[float], nbytes: Sequence[int], latency_ms: float,
                      ms_per_byte: float, cap: Optional[int] = None,
                      alone: Optional[dict[int, float]] = None) -> list[tuple[int, ...]]:
    """The best partition under the line ``latency_ms + ms_per_byte · bytes``; ``alone``
    maps the gradients that travel on their own to the ms their collective takes.

    Fusing the first two saves one latency; fusing all three would wait for the last:

    >>> optimal_partition([1.0, 2.0, 6.0], [100, 100, 100], latency_ms=2.0, ms_per_byte=0.01)
    [(0, 1), (2,)]
    >>> optimal_partition([1.0, 2.0, 6.0], [100, 100, 100], 2.0, 0.01, alone={1: 9.0})
    [(0,), (1,), (2,)]
    """
    return line_partition(ready, nbytes, Linear(latency_ms, ms_per_byte), cap, alone)[0]


def _end(buckets, ready, prefix, curve: Curve, alone: dict[int, float]) -> float:
    """When the last of ``buckets`` ends on the schedule (DESIGN 4.3): a bucket that waits
    for the one before it takes the queued time."""
    queued = curve.queued or curve
    free: Optional[float] = None
    for b in buckets:
        r = ready[b[-1]]
        waits = free is not None and r <= free
        start = free if waits else r
        if len(b) == 1 and b[0] in alone:
            free = start + alone[b[0]]
        else:
            free = start + (queued if waits else curve).time(prefix[b[-1] + 1] - prefix[b[0]])
    return free if free is not None else 0.0


def _lesser(a: Curve, b: Curve) -> Curve:
    """The pointwise lesser of two curves (monotone where both are; a line past both tails
    where those have one slope)."""
    ta, tb = a.time, b.time
    tail = None
    if a.tail is not None and b.tail is not None and a.tail[1].ms_per_byte == b.tail[1].ms_per_byte:
        tail = (max(a.tail[0], b.tail[0]), Linear(min(a.tail[1].latency_ms, b.tail[1].latency_ms),
                                                  a.tail[1].ms_per_byte))
    return Curve(lambda x: min(ta(x), tb(x)), a.monotone and b.monotone,
                 Linear(min(a.minorant.latency_ms, b.minorant.latency_ms),
                        min(a.minorant.ms_per_byte, b.minorant.ms_per_byte)), None, tail)


def search(ready: Sequence[float], nbytes: Sequence[int], curve: Curve, cap: Optional[int] = None,
           alone: Optional[dict[int, float]] = None, lines: Sequence[Linear] = (),
           budget: int = SCAN_BUDGET) -> Found:
    """The best partition under ``curve`` (exact where the module's docstring says), else
    the best of the searches tried with the bound it is within; ``lines``: more straight
    lines whose best partitions are candidates there (the model's secant)."""
    alone = alone or {}
    if curve.queued is None:
        if curve.monotone:
            return Found(*curve_partition(ready, nbytes, curve, cap, alone))
        work = window_work(ready, nbytes, cap, alone)
        if work <= budget:
            return Found(*scan_partition(ready, nbytes, curve.time, cap, alone))
        why = (f"the model's curve is not monotone (a bigger bucket can take less time) and "
               f"an exact search would evaluate {work:,} buckets")
        bound = line_partition(ready, nbytes, curve.minorant, cap, alone)[1]
        tries, found = [curve] if work <= 4 * budget else [], []
    else:
        lesser = _lesser(curve, curve.queued)
        why = ("the model times a bucket queued behind another apart from one started alone, "
               "so the best end of a prefix need not start the best plan")
        below = (curve_partition(ready, nbytes, lesser, cap, alone) if lesser.monotone
                 else line_partition(ready, nbytes, lesser.minorant, cap, alone))
        bound, tries, found = below[1], [], [below[0]]
    prefix = [0]
    for size in nbytes:
        prefix.append(prefix[-1] + size)
    found += [curve_partition(ready, nbytes, c, cap, alone)[0] for c in tries]
    found += [line_partition(ready, nbytes, line, cap, alone)[0]
              for line in lines if line.ms_per_byte >= 0]
    if not found:  # no secant given: the minorant's partition
        found = [line_partition(ready, nbytes, curve.minorant, cap, alone)[0]]
    timed = [(_end(b, ready, prefix, curve, alone), len(b), k) for k, b in enumerate(found)]
    end, _, k = min(timed)
    return Found(found[k], end, min(bound, end), why)


def optimal(grads: Sequence[Grad], opts, cost: CostModel) -> Grouping:
    """The registry entry: the best partition under ``cost``, capped by ``max_bytes``."""
    if cost is None:
        raise PlanError("the optimal strategy needs a cost model")
    lone = sparse_alone(grads, opts)
    kind = CollectiveKind.ALL_REDUCE
    found = search([g.ready_ms for g in grads], [g.nbytes for g in grads], cost.curve(kind),
                   opts.max_bytes, {i: cost.time_ms(CollectiveKind.ALL_GATHER, grads[i].nbytes)
                                    for i in lone}, (cost.linear(kind),))
    notes = () if found.exact else (bound_note(found),)
    return Grouping(found.buckets, collectives=collectives_of(found.buckets, lone), notes=notes)


def bound_note(found: Found) -> str:
    """What a plan whose search was not exact must say."""
    gap = found.end_ms - found.bound_ms
    return (f"optimal within {gap:.3f} ms, not proven exact: {found.why}; its last collective "
            f"ends at {found.end_ms:.3f} ms and none can end before {found.bound_ms:.3f} ms")


SPEC = StrategySpec("optimal", optimal, OptimalOptions)
"""Its plans are contiguous partitions: DDP's per-bucket caps reproduce them."""
