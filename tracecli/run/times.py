"""Wait against transfer, for one collective seen on the ranks of its group.

Ring and tree collectives (and a gloo send with its recv, a rendezvous) end on every rank
within microseconds, whoever arrived last: so the **transfer** is the shortest per-rank
duration (the last rank to arrive waited for nobody), each rank's **wait** is its duration
minus the transfer, and the rank with the shortest duration arrived **last**. Its
**lateness** is the gap between the last two arrivals (the wait of the rank that arrived
just before it): what everyone would have saved had it been on time. None of this needs the
ranks' clocks to agree: each duration is measured on one clock.

A rank arrives at a collective when it starts running there (the kernel, gloo's span); at a
send or recv when it was launched (a blocking recv may wait inside its launch op). Where a
member of the group has no trace in the run, the transfer holds its lateness too:
``complete`` is then false.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from .align import Matched

__all__ = ["CollectiveTimes", "times_of", "SYNC_KINDS"]

SYNC_KINDS = frozenset({"allreduce", "allgather", "reduce_scatter", "barrier", "alltoall",
                        "send", "recv"})


class CollectiveTimes(NamedTuple):
    matched: Matched
    duration_ms: dict[int, float]
    transfer_ms: Optional[float]  # None with one rank, or without every rank's execution
    wait_ms: dict[int, float]
    last: Optional[int]
    lateness_ms: float  # what the last rank's lateness cost (0 with fewer than 2 ranks)
    complete: bool  # every member of its group has a trace in the run

    @property
    def synchronising(self) -> bool:
        """Its ends agree across ranks on the true clock (clock offsets come from these)."""
        return self.transfer_ms is not None and self.matched.first.kind.value in SYNC_KINDS


def arrival_ms(c) -> Optional[float]:
    """When a rank arrived at ``c`` (ms of its step): its launch for a send or recv, else
    when it began to run."""
    return c.launch_ms if c.kind.point_to_point else c.start_ms


def times_of(m: Matched) -> CollectiveTimes:
    dur = {}
    for r, c in m.by_rank.items():
        start = arrival_ms(c)
        if start is not None and c.end_ms is not None:
            dur[r] = max(c.end_ms - start, 0.0)
    complete = not m.missing
    if len(m.by_rank) < 2 or len(dur) < len(m.by_rank):
        return CollectiveTimes(m, dur, None, {}, None, 0.0, complete)
    ordered = sorted(dur.items(), key=lambda rd: (rd[1], rd[0]))
    last, transfer = ordered[0]
    wait = {r: d - transfer for r, d in dur.items()}
    return CollectiveTimes(m, dur, transfer, wait, last, ordered[1][1] - transfer, complete)
