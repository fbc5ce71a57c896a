"""The predicted timeline of a bucket plan (DESIGN 4.3).

Backward ops run one after another; buckets go in bucket order on one channel: bucket k
starts at ``max(its last gradient ready, end of bucket k-1)`` and lasts ``T(bytes_k)``
(a cost model that measured it so: ``T`` of a bucket that waited for the one before it).
Iteration = ``max(backward end, last bucket end) + update``; exposed communication =
iteration - compute. All times are ms from the start of the step (forward included).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from ..costs import CostModel
from ..model import CollectiveKind
from .base import Grad, Grouping
from .schedule import Comm, Span, Step, StepTimes, run

__all__ = ["BucketTiming", "Timeline", "simulate", "timeline_of", "lower_bound"]


class BucketTiming(NamedTuple):
    """One bucket (one collective) of a timeline. Sharded strategies (FSDP) add where it
    ran and why: ``phase`` (``forward`` / ``backward``), ``unit`` (the module whose
    parameters it carries), ``elements`` (the unsharded count: an all-gather's output, a
    reduce-scatter's input), ``channel`` (the collective's queue in the schedule) and
    ``group`` (the ranks it runs on); ``None`` for a gradient bucket."""

    index: int
    members: tuple[int, ...]
    nbytes: int
    dtype: str
    ready_ms: float
    start_ms: float
    end_ms: float
    collective: CollectiveKind = CollectiveKind.ALL_REDUCE
    phase: Optional[str] = None
    unit: Optional[str] = None
    elements: Optional[int] = None
    channel: Optional[str] = None
    group: Optional[int] = None

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms


class Timeline(NamedTuple):
    buckets: tuple[BucketTiming, ...]
    forward_ms: float
    backward_end_ms: float
    update_ms: float
    iteration_ms: float
    compute_ms: float
    exposed_comm_ms: float
    comm_ms: float  # sum of bucket durations

    @property
    def overlap_pct(self) -> float:
        """Share of communication hidden behind compute."""
        if self.comm_ms <= 0:
            return 100.0
        return max(0.0, 100.0 * (self.comm_ms - self.exposed_comm_ms) / self.comm_ms)


def _dtype(grads: Sequence[Grad], members: tuple[int, ...]) -> str:
    kinds = {grads[i].dtype for i in members}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def simulate(grads: Sequence[Grad], grouping: Grouping, cost: CostModel, forward_ms: float,
             backward_end_ms: float, update_ms: float = 0.0) -> Timeline:
    """The timeline of ``grouping`` (buckets in launch order): compute until
    ``backward_end_ms``, the buckets on one channel, each ready when its last gradient is
    (and not before its ``not_before``), scheduled by :func:`~.schedule.run`."""
    comms, members = [], []
    for k, bucket in enumerate(grouping.buckets):
        if grouping.messages is not None:
            nbytes, dtype = grouping.messages[k]
        else:
            nbytes, dtype = sum(grads[i].nbytes for i in bucket), _dtype(grads, bucket)
        ready = max(grads[i].ready_ms for i in bucket)
        if grouping.not_before is not None:
            ready = max(ready, grouping.not_before[k])
        kind = grouping.collectives[k] if grouping.collectives else CollectiveKind.ALL_REDUCE
        comms.append(Comm(kind, nbytes, ready_ms=ready))
        members.append((tuple(bucket), dtype))
    times = run(Step((Span(backward_end_ms),), tuple(comms), update_ms),
                lambda comm, queued: cost.time_ms(comm.kind, comm.nbytes, queued))
    timings = tuple(BucketTiming(k, m, c.nbytes, dtype, t.ready_ms, t.start_ms, t.end_ms, c.kind)
                    for k, ((m, dtype), c, t) in enumerate(zip(members, comms, times.comms)))
    return timeline_of(timings, forward_ms, backward_end_ms, update_ms, times)


def timeline_of(timings: tuple[BucketTiming, ...], forward_ms: float, backward_end_ms: float,
                update_ms: float, times: StepTimes) -> Timeline:
    """The :class:`Timeline` of buckets the schedule timed (``times``)."""
    return Timeline(timings, forward_ms, backward_end_ms, update_ms, times.iteration_ms,
                    times.compute_ms, times.exposed_ms, times.comm_ms)


def lower_bound(grads: Sequence[Grad], cost: CostModel, backward_end_ms: float,
                update_ms: float = 0.0) -> Optional[float]:
    """No plan beats this under ``cost``: backward must end; the bucket holding the
    last-ready gradient starts no earlier than it and lasts at least ``T`` of that gradient
    alone (the least of its collective's times, queued or not); and, where ``T`` is the
    straight line, all bytes go through one channel after the first gradient is ready,
    paying at least one latency.

    DESIGN 4.3's ``max(backward + T(last alone), first ready + b·all bytes)`` is this bound
    when the last gradient is ready as backward ends. A model that answers from
    measurements (``basis`` not ``None``) is not a line: a sum of measured times need not
    exceed the line's, so the third term is left out there, as for a model that picks an
    algorithm and protocol per size (NCCL's: a piecewise curve below its secant ``linear``
    in places), and where sparse gradients are all-gathered, not reduced; the bound stays a
    bound of every timeline :func:`simulate` gives.
    """
    if not grads:
        return None
    last = max(grads, key=lambda g: g.ready_ms)
    first = min(g.ready_ms for g in grads)
    total = sum(g.nbytes for g in grads)
    reduce = CollectiveKind.ALL_REDUCE
    kinds = (reduce, CollectiveKind.ALL_GATHER) if last.sparse else (reduce,)
    alone = min(cost.time_ms(k, last.nbytes, q) for k in kinds for q in (False, True))
    bound = max(backward_end_ms, last.ready_ms + alone)
    line = cost.basis(reduce, total) is None and cost.algorithm_protocol(reduce, total) is None
    if line and not any(g.sparse for g in grads):
        latency_ms, ms_per_byte = cost.linear(reduce)
        bound = max(bound, first + latency_ms + ms_per_byte * total)
    return bound + update_ms
