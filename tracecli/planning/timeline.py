"""The predicted timeline of a bucket plan (DESIGN 4.3).

Backward ops run one after another; buckets go in bucket order on one channel: bucket k
starts at ``max(its last gradient ready, end of bucket k-1)`` and lasts ``T(bytes_k)``
(a cost model that measured it so: ``T`` of a bucket that waited for the one before it);
a bucket sent as several collectives (DeepSpeed's pieces) is each of them in turn, each
costed as its own collective.
Iteration = ``max(backward end, last bucket end) + update``; exposed communication =
iteration - compute. All times are ms from the start of the step (forward included).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from ..costs import CostModel
from ..model import CollectiveKind
from .base import Grad, Grouping, Message
from .schedule import Comm, Span, Step, StepTimes, run

__all__ = ["BucketTiming", "Piece", "Timeline", "simulate", "timeline_of", "lower_bound"]


class Piece(NamedTuple):
    """One of the collectives a bucket is sent as, where it is sent as several."""

    nbytes: int
    start_ms: float
    end_ms: float


class BucketTiming(NamedTuple):
    """One bucket (one collective) of a timeline: its gradients, what it sends (``nbytes`` in
    ``dtype``), when it is ready, starts and ends; ``pieces``: where it is sent as several
    collectives, each's bytes and times (its start is the first's, its end the last's), ``()``
    where it is one. Sharded strategies (FSDP) add where it ran and why: ``phase``
    (``forward`` / ``backward``), ``unit`` (the module whose parameters it carries),
    ``elements`` (the unsharded count: an all-gather's output, a reduce-scatter's input),
    ``channel`` (the collective's queue in the schedule) and ``group`` (the ranks it runs
    on); ``None`` for a gradient bucket."""

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
    pieces: tuple[Piece, ...] = ()

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
    comms, sent = [], []
    for k, bucket in enumerate(grouping.buckets):
        if grouping.messages is not None:
            message = Message(*grouping.messages[k])
        else:
            message = Message(sum(grads[i].nbytes for i in bucket), _dtype(grads, bucket))
        ready = max((grads[i].ready_ms for i in bucket), default=0.0)  # none: not_before
        if grouping.not_before is not None:
            ready = max(ready, grouping.not_before[k])
        kind = grouping.collectives[k] if grouping.collectives else CollectiveKind.ALL_REDUCE
        for nbytes in message.pieces or (message.nbytes,):  # a piece a collective, in turn
            comms.append(Comm(kind, nbytes, ready_ms=ready))
        sent.append((tuple(bucket), message, kind))
    times = run(Step((Span(backward_end_ms),), tuple(comms), update_ms),
                lambda comm, queued: cost.time_ms(comm.kind, comm.nbytes, queued))
    timings, at = [], 0
    for k, (bucket, message, kind) in enumerate(sent):
        n = len(message.pieces) or 1
        t = times.comms[at:at + n]
        pieces = tuple(Piece(c.nbytes, x.start_ms, x.end_ms)
                       for c, x in zip(comms[at:at + n], t)) if n > 1 else ()
        timings.append(BucketTiming(k, bucket, message.nbytes, message.dtype, t[0].ready_ms,
                                    t[0].start_ms, t[-1].end_ms, kind, pieces=pieces))
        at += n
    return timeline_of(tuple(timings), forward_ms, backward_end_ms, update_ms, times)


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
