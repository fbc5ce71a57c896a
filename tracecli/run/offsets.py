"""Clock offsets from every synchronising collective.

A synchronising collective (all-reduce, all-gather, reduce-scatter, barrier, all-to-all, a
send with its recv) ends on all its ranks at the same true time, so on rank r's clock its end
reads ``offset_r`` later than on the true clock: each one gives, for each pair of its ranks
(its lowest rank and each other), a measurement of the difference of their offsets. Per
pair, the median of those measurements is the pair's difference and their median absolute
deviation its spread.

Groups need not hold every rank (a pipeline's stages, tensor-parallel pairs): the pairs form
a graph, and each rank's offset is carried from the lowest rank along the tree of the pairs
measured most often (a maximum spanning tree, Prim's), adding differences and spreads along
the path. A rank no synchronising collective links to the lowest rank keeps its recorded
clock (its ``baseTimeNanoseconds``), with no spread, and the report says so.
"""

from __future__ import annotations

import heapq
import statistics
from collections import defaultdict
from typing import NamedTuple, Optional, Sequence

from .extract import at_us
from .load import Run
from .times import CollectiveTimes

__all__ = ["Offsets", "offsets"]


class Offsets(NamedTuple):
    offset_us: dict[int, float]  # how far each rank's clock reads ahead of the lowest rank's
    spread_us: dict[int, Optional[float]]  # None: not estimated (the recorded clock)
    collectives: int  # synchronising collectives used
    via: dict[int, Optional[int]]  # the rank each offset was carried from (None: the lowest)
    unlinked: tuple[int, ...]  # ranks no synchronising collective links to the lowest


def _pair_measurements(run: Run, times: Sequence[CollectiveTimes]) -> tuple[dict, int]:
    shift = {r.rank: float(r.base_us - run.base_us) for r in run.ranks}
    steps = {r.rank: {s.index: s for s in r.steps} for r in run.ranks}
    diffs: dict[tuple[int, int], list[float]] = defaultdict(list)
    used = 0
    for t in times:
        if not t.synchronising:
            continue
        ends = {}
        for r, c in t.matched.by_rank.items():
            step = steps[r].get(c.step)
            if step is not None and c.end_ms is not None:
                ends[r] = at_us(step, c.end_ms) + shift[r]
        if len(ends) < 2:
            continue
        used += 1
        ref = min(ends)
        for r, end in ends.items():
            if r != ref:
                diffs[(ref, r)].append(end - ends[ref])
    return diffs, used


def offsets(run: Run, times: Sequence[CollectiveTimes]) -> Offsets:
    diffs, used = _pair_measurements(run, times)
    edges: dict[int, list[tuple[int, int, float, float]]] = defaultdict(list)
    for (a, b), values in diffs.items():
        mid = statistics.median(values)
        mad = statistics.median(abs(v - mid) for v in values)
        edges[a].append((len(values), b, mid, mad))
        edges[b].append((len(values), a, -mid, mad))
    low = run.ranks[0].rank
    offset, spread, via = {low: 0.0}, {low: 0.0}, {low: None}
    heap = [(-n, a_rank, low, mid, mad) for n, a_rank, mid, mad in edges[low]]
    heapq.heapify(heap)
    while heap:
        n, r, parent, mid, mad = heapq.heappop(heap)
        if r in offset:
            continue
        offset[r], spread[r], via[r] = offset[parent] + mid, spread[parent] + mad, parent
        for m, s, mid2, mad2 in edges[r]:
            if s not in offset:
                heapq.heappush(heap, (-m, s, r, mid2, mad2))
    unlinked = []
    for r in run.ranks:
        if r.rank not in offset:
            offset[r.rank] = float(r.base_us - run.ranks[0].base_us)
            spread[r.rank], via[r.rank] = None, None
            unlinked.append(r.rank)
    return Offsets(offset, spread, used, via, tuple(unlinked))
