"""One rank's trace with its collectives timed as they would have run with every rank on time.

A rank's recorded collective holds its wait for the last rank and then the transfer. With
every rank's trace, the transfer is known (:mod:`.analyze`): each collective of the lowest
rank lasts its transfer alone, and starts earlier by the waits before it in its step (the
ones queued behind a wait move up; none before its launch). The cost model fitted to that
trace is fitted to transfer times, and its as-run plan is the run with no rank waiting.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ..model import Trace
from .analyze import RunReport

__all__ = ["without_waits"]


def _union_before(spans: list[tuple[float, float]], t: float) -> float:
    """The time before ``t`` that ``spans`` cover (overlaps once)."""
    total, cur = 0.0, None
    for a, b in sorted((a, min(b, t)) for a, b in spans if a < t):
        if cur is None or a > cur[1]:
            total += 0.0 if cur is None else cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (0.0 if cur is None else cur[1] - cur[0])


def without_waits(trace: Trace, report: RunReport) -> tuple[Trace, int, int]:
    """``trace`` (the lowest rank's) with each matched collective lasting ``transfer_ms``,
    and every collective of a step starting earlier by the waits before it (those queued
    behind a wait, as gloo's and NCCL's are, move up; none before its launch). Returns it,
    how many collectives were given their transfer time, and how many of the trace's timed
    collectives kept their recorded durations (not matched on every rank)."""
    low = report.run.ranks[0]
    position: dict[int, tuple[Optional[int], int]] = {}
    counters: dict = defaultdict(int)
    for c in low.collectives:
        position[id(c)] = (c.step, counters[c.step])
        counters[c.step] += 1
    found: dict[tuple, tuple[float, float, str, Optional[int]]] = {}
    for t in report.collectives:
        c = t.matched.by_rank.get(low.rank)
        if c is not None and t.transfer_ms is not None:
            found[position[id(c)]] = (t.transfer_ms, t.wait_ms[low.rank], c.kind, c.elements)
    def matching(c, k: int):
        hit = found.get((c.step, k))
        if hit is None or hit[2] is not c.kind:
            return None
        if hit[3] is not None and c.elements is not None and hit[3] != c.elements:
            return None
        return hit

    keyed = []
    seen: dict = defaultdict(int)
    waits: dict = defaultdict(list)  # step -> (start, end) of this rank's waits, ms
    for c in trace.collectives():
        hit = matching(c, seen[c.step])
        seen[c.step] += 1
        keyed.append((c, hit))
        if hit is not None and c.start_ms is not None:
            waits[c.step].append((c.start_ms, c.start_ms + hit[1]))
    out, changed, kept = [], 0, 0
    for c, hit in keyed:
        if c.start_ms is None or c.end_ms is None:
            out.append(c)
            continue
        start = max(c.launch_ms, c.start_ms - _union_before(waits[c.step], c.start_ms))
        if hit is not None:
            out.append(c._replace(start_ms=start, end_ms=start + hit[0]))
            changed += 1
        else:
            out.append(c._replace(start_ms=start, end_ms=start + (c.end_ms - c.start_ms)))
            kept += 1
    return trace.with_collectives(out), changed, kept
