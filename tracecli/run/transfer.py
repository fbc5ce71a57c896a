"""One rank's trace with its collectives timed as the run would have without stragglers.

A rank's recorded collective holds its wait for the last rank and then the transfer. With
every rank's trace, the transfer is known (:mod:`.analyze`): the collective of the lowest
rank keeps its start (when that rank arrived) and ends after the transfer alone. The
cost model fitted to that trace is fitted to transfer times, and its as-run plan is the run
without its stragglers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ..model import Trace
from .analyze import RunReport

__all__ = ["without_waits"]


def without_waits(trace: Trace, report: RunReport) -> tuple[Trace, int, int]:
    """``trace`` (the lowest rank's) with each matched collective ending ``transfer_ms``
    after it started; returns it, how many collectives were changed, and how many of the
    trace's timed collectives kept their recorded times (not matched on every rank)."""
    low = report.run.ranks[0]
    position: dict[int, tuple[Optional[int], int]] = {}
    counters: dict = defaultdict(int)
    for c in low.collectives:
        position[id(c)] = (c.step, counters[c.step])
        counters[c.step] += 1
    transfer: dict[tuple, tuple[float, str, Optional[int]]] = {}
    for t in report.collectives:
        c = t.matched.by_rank.get(low.rank)
        if c is not None and t.transfer_ms is not None:
            transfer[position[id(c)]] = (t.transfer_ms, c.kind, c.elements)
    out, changed, kept = [], 0, 0
    seen: dict = defaultdict(int)
    for c in trace.collectives():
        key = (c.step, seen[c.step])
        seen[c.step] += 1
        found = transfer.get(key)
        if found is not None and c.start_ms is not None and found[1] == c.kind.value \
                and (found[2] is None or c.elements is None or found[2] == c.elements):
            out.append(c._replace(end_ms=c.start_ms + found[0]))
            changed += 1
        else:
            out.append(c)
            kept += c.start_ms is not None
    return trace.with_collectives(out), changed, kept
