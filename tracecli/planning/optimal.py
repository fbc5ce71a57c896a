"""The optimal plan: the contiguous partition of the readiness order with the smallest
predicted iteration time under the timeline model (DESIGN 4.3), exactly, in O(n).

With ready times ``R`` (non-decreasing in readiness order), prefix sums ``S`` of bytes and a
collective costing ``c + b·bytes``, the earliest time the first ``j`` gradients can all be
reduced is

    F[0] = 0,   F[j] = min over i of  max(R[j], F[i]) + c + b·(S[j] - S[i])

over the ``i`` whose bucket ``(i, j]`` respects the cap (a single gradient may exceed it).
F is non-decreasing, so the ``i`` with ``F[i] <= R[j]`` form a prefix, of which the largest
is best (``R[j] - b·S[i]`` falls with i); for the others the term is ``F[i] - b·S[i]``,
whose minimum over a window with non-decreasing ends a monotone deque keeps. Minimising
``F[n]`` minimises the iteration time, ``forward + max(backward end, F[n])``.
MG-WFBP's merge rule is a heuristic for the same objective; this is the exact optimum.

A gradient that must travel alone (a sparse one, all-gathered: ``alone``) is its own
bucket: ``F[s+1] = max(R[s+1], F[s]) + T_alone(s)``, and no later bucket may reach back
past it, so the window's left end moves past ``s``, as the cap moves it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Optional, Sequence

from ..costs import CostModel
from ..errors import PlanError
from ..model import CollectiveKind
from .base import Grad, Grouping, collectives_of, sparse_alone
from .spec import MAX_BYTES, SPARSE_AS_DENSE, Options, StrategySpec

__all__ = ["optimal", "optimal_partition", "SPEC", "OptimalOptions"]


@dataclass(frozen=True)
class OptimalOptions(Options):
    max_bytes: Optional[int] = MAX_BYTES.field()  # an optional cap on every bucket
    sparse_as_dense: bool = SPARSE_AS_DENSE.field()


def optimal_partition(ready: Sequence[float], nbytes: Sequence[int], latency_ms: float,
                      ms_per_byte: float, cap: Optional[int] = None,
                      alone: Optional[dict[int, float]] = None) -> list[tuple[int, ...]]:
    """Buckets (index tuples) of the best contiguous partition; ``alone`` maps the
    gradients that travel on their own to the ms their collective takes.

    Fusing the first two saves one latency; fusing all three would wait for the last:

    >>> optimal_partition([1.0, 2.0, 6.0], [100, 100, 100], latency_ms=2.0, ms_per_byte=0.01)
    [(0, 1), (2,)]
    >>> optimal_partition([1.0, 2.0, 6.0], [100, 100, 100], 2.0, 0.01, alone={1: 9.0})
    [(0,), (1,), (2,)]
    """
    alone = alone or {}
    n = len(ready)
    if n == 0:
        return []
    for a, b in zip(ready, ready[1:]):
        if b < a:
            raise PlanError("gradient ready times must not decrease in readiness order")
    prefix = [0] * (n + 1)
    for j, size in enumerate(nbytes, 1):
        prefix[j] = prefix[j - 1] + size
    finish = [0.0] * (n + 1)
    parent = [0] * (n + 1)
    window: deque[int] = deque()  # indices i with increasing finish[i] - b·prefix[i]
    k = 0  # largest i with finish[i] <= ready (moves right only)
    lo = 0  # smallest i whose bucket (i, j] fits the cap and holds no lone gradient
    barrier = 0  # just past the last lone gradient

    def key(i: int) -> float:
        return finish[i] - ms_per_byte * prefix[i]

    for j in range(1, n + 1):
        r = ready[j - 1]
        # the newest candidate, i = j - 1
        i_new = j - 1
        while window and key(window[-1]) >= key(i_new):
            window.pop()
        window.append(i_new)
        if cap is not None:
            while lo < j - 1 and prefix[j] - prefix[lo] > cap:
                lo += 1
        lo = max(lo, barrier)
        while k + 1 <= j - 1 and finish[k + 1] <= r:
            k += 1
        if j - 1 in alone:  # this gradient travels alone, after everything before it
            finish[j], parent[j] = max(r, finish[j - 1]) + alone[j - 1], j - 1
            barrier = j
            continue
        best, best_i = float("inf"), -1
        if k >= lo:
            best, best_i = r + latency_ms + ms_per_byte * (prefix[j] - prefix[k]), k
        left = max(lo, k + 1)
        while window and window[0] < left:
            window.popleft()
        if window:
            i = window[0]
            value = key(i) + latency_ms + ms_per_byte * prefix[j]
            if value < best or (value == best and i > best_i):
                best, best_i = value, i
        finish[j], parent[j] = best, best_i
    buckets = []
    j = n
    while j > 0:
        i = parent[j]
        buckets.append(tuple(range(i, j)))
        j = i
    return buckets[::-1]


def optimal(grads: Sequence[Grad], opts, cost: CostModel) -> Grouping:
    """The registry entry: the best partition under ``cost``, capped by ``max_bytes``."""
    if cost is None:
        raise PlanError("the optimal strategy needs a cost model")
    lone = sparse_alone(grads, opts)
    latency_ms, ms_per_byte = cost.linear(CollectiveKind.ALL_REDUCE)
    buckets = optimal_partition([g.ready_ms for g in grads], [g.nbytes for g in grads],
                                latency_ms, ms_per_byte, opts.max_bytes,
                                {i: cost.time_ms(CollectiveKind.ALL_GATHER, grads[i].nbytes)
                                 for i in lone})
    return Grouping(buckets, collectives=collectives_of(buckets, lone))


SPEC = StrategySpec("optimal", optimal, OptimalOptions)
"""Its plans are contiguous partitions: DDP's per-bucket caps reproduce them."""
