"""The step's schedule (DESIGN 4.3): the one model of when compute and collectives run.

Compute runs on one stream, span after span. Collectives run on channels, each channel one
collective at a time in its order: DDP has one channel; FSDP an all-gather and a
reduce-scatter channel; HSDP adds an all-reduce. A collective starts when it is ready (the
compute point it follows has been reached, or a recorded time) and its channel is free; a
compute span may wait for collectives to end (FSDP: a unit's forward waits for its
all-gather). The iteration ends when the last compute span or collective ends, plus the
optimizer update; exposed communication is the iteration minus compute.

Every timeline tracecli predicts (:func:`~.timeline.simulate`), measures (the observed plan)
or replays (:mod:`tracecli.replay`) is made by the functions here.

Two gradient buckets on one channel behind 10 ms of compute; the second waits for the first:

>>> step = Step((Span(10.0),), (Comm(CollectiveKind.ALL_REDUCE, 100, ready_ms=4.0),
...                              Comm(CollectiveKind.ALL_REDUCE, 100, ready_ms=5.0)))
>>> times = run(step, lambda comm, queued: 3.0)
>>> [(t.start_ms, t.end_ms, t.queued) for t in times.comms], times.iteration_ms, times.exposed_ms
([(4.0, 7.0, False), (7.0, 10.0, True)], 10.0, 0.0)

A forward that waits for its all-gather, and a reduce-scatter after the backward span:

>>> fsdp = Step((Span(0.0), Span(2.0, waits=(0,)), Span(4.0)),
...             (Comm(CollectiveKind.ALL_GATHER, 10, channel="allgather", after=0),
...              Comm(CollectiveKind.REDUCE_SCATTER, 10, channel="reducescatter", after=3)))
>>> t = run(fsdp, lambda comm, queued: 1.5)
>>> t.span_end_ms, t.iteration_ms, t.compute_ms, t.exposed_ms
((0.0, 3.5, 7.5), 9.0, 6.0, 3.0)
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence

from ..errors import PlanError
from ..model import CollectiveKind

__all__ = ["Span", "Comm", "Step", "CommTime", "StepTimes", "run", "recorded", "channel_starts",
           "issue_times", "GRADIENTS"]

GRADIENTS = "gradients"  # the channel of gradient buckets (DDP, Horovod, ...): one channel


class Span(NamedTuple):
    """A stretch of compute on the stream, ``ms`` long, started once the collectives
    ``waits`` (indices into the step's comms) have ended."""

    ms: float
    waits: tuple[int, ...] = ()
    label: str = ""


class Comm(NamedTuple):
    """One collective on ``channel``: ready after ``after`` compute spans have run, or at
    ``ready_ms`` (a recorded or precomputed time; the later of the two where both are given),
    and not before the collective ``follows`` (an index into the step's comms) has ended
    (HSDP's all-reduce of a reduce-scatter's output)."""

    kind: CollectiveKind
    nbytes: int
    channel: str = GRADIENTS
    after: Optional[int] = None
    ready_ms: Optional[float] = None
    follows: Optional[int] = None


class Step(NamedTuple):
    """Compute ``spans`` from the step's start, ``comms`` in each channel's order, then the
    optimizer ``update_ms``."""

    spans: tuple[Span, ...]
    comms: tuple[Comm, ...]
    update_ms: float = 0.0


class CommTime(NamedTuple):
    ready_ms: float
    start_ms: float
    end_ms: float
    queued: bool  # ready before its channel was free: it started behind the one before it


class StepTimes(NamedTuple):
    comms: tuple[CommTime, ...]
    span_end_ms: tuple[float, ...]
    compute_end_ms: float  # the last span's end
    compute_ms: float  # busy compute (spans and update), without waits
    iteration_ms: float
    exposed_ms: float  # iteration - compute
    comm_ms: float  # the collectives' durations, summed


def _ready(comm: Comm, span_end: Callable[[int], float]) -> float:
    times = [t for t in (comm.ready_ms, span_end(comm.after) if comm.after is not None else None)
             if t is not None]
    if not times and comm.follows is not None:
        return 0.0
    if not times:
        raise PlanError("a collective of the schedule is ready neither at a time nor after compute")
    return max(times)


def run(step: Step, duration: Callable[[Comm, bool], float]) -> StepTimes:
    """The step's times, each collective lasting ``duration(comm, queued)`` ms.

    Spans run in order; a span waits for the collectives it names, which may in turn wait
    for earlier spans and for the collectives before them on their channels. A span that
    waits for a collective ready only after that span (directly or through its channel) can
    never run: a :class:`PlanError` says so.
    """
    spans, comms = step.spans, step.comms
    ends: list[float] = []  # span k's end
    times: list[Optional[CommTime]] = [None] * len(comms)
    previous: list[Optional[int]] = [None] * len(comms)  # the comm before it on its channel
    last: dict[str, int] = {}
    for i, c in enumerate(comms):
        previous[i] = last.get(c.channel)
        last[c.channel] = i

    def span_end(k: int) -> float:
        if k > len(ends):
            raise PlanError(f"a collective waits for compute span {k}, which itself waits for "
                            "that collective: the schedule can never run")
        return ends[k - 1] if k > 0 else 0.0

    def comm_time(i: int) -> CommTime:
        done = times[i]
        if done is not None:
            return done
        p, f = previous[i], comms[i].follows
        if (p is None or times[p] is not None) and (f is None or times[f] is not None):
            return time_one(i, p, f)  # waits for nothing untimed: the usual case, in order
        stack, on = [i], {i}
        while stack:  # what it waits for first (the comm before it, the one it follows)
            j = stack[-1]
            p, f = previous[j], comms[j].follows
            for dep in (p, f):
                if dep is not None and times[dep] is None:
                    if dep in on:
                        raise PlanError("a collective of the schedule waits for itself (it "
                                        "follows one queued behind it)")
                    stack.append(dep)
                    on.add(dep)
                    break
            if stack[-1] != j:
                continue
            stack.pop()
            on.discard(j)
            if times[j] is None:
                time_one(j, p, f)
        return times[i]

    def time_one(j: int, p: Optional[int], f: Optional[int]) -> CommTime:
        """Comm ``j``'s times, those it waits for (``p`` before it, ``f`` it follows) timed."""
        ready = _ready(comms[j], span_end)
        if f is not None:
            ready = max(ready, times[f].end_ms)
        free = times[p].end_ms if p is not None else None
        queued = free is not None and ready <= free
        start = max(ready, free) if free is not None else ready
        hit = times[j] = CommTime(ready, start, start + duration(comms[j], queued), queued)
        return hit

    clock = 0.0
    for span in spans:
        for w in span.waits:
            clock = max(clock, comm_time(w).end_ms)
        clock += span.ms
        ends.append(clock)
    timed = tuple(comm_time(i) for i in range(len(comms)))
    busy = sum(s.ms for s in spans)
    return _totals(timed, tuple(ends), busy, step.update_ms)


def recorded(compute_end_ms: float, comms: Sequence[CommTime], update_ms: float = 0.0) -> StepTimes:
    """A measured step's totals, by the same definitions: compute ran until
    ``compute_end_ms`` (its busy time: a measurement does not say what waited), the
    collectives as recorded."""
    return _totals(tuple(comms), (compute_end_ms,), compute_end_ms, update_ms)


def _totals(comms: tuple[CommTime, ...], ends: tuple[float, ...], busy: float,
            update_ms: float) -> StepTimes:
    compute_end = ends[-1] if ends else 0.0
    last = max((t.end_ms for t in comms), default=compute_end)
    iteration = max(compute_end, last) + update_ms
    compute = busy + update_ms
    comm = sum(t.end_ms - t.start_ms for t in comms)
    return StepTimes(comms, ends, compute_end, compute, iteration, iteration - compute, comm)


def channel_starts(ready: Sequence[float], ends: Sequence[float]) -> tuple[float, ...]:
    """One channel, as a replay measured it: each collective starts when it is issued and the
    one before it has ended.

    >>> channel_starts([1.0, 2.0, 9.0], [5.0, 8.0, 10.0])
    (1.0, 5.0, 9.0)
    """
    starts, free = [], None
    for at, end in zip(ready, ends):
        starts.append(at if free is None else max(at, free))
        free = end
    return tuple(starts)


def issue_times(ready: Sequence[float]) -> tuple[float, ...]:
    """When the host issues collectives in order, each once it is ready: never before the one
    before it (DDP's reducer launches its buckets in order).

    >>> issue_times([2.0, 1.0, 3.0])
    (2.0, 2.0, 3.0)
    """
    out, latest = [], 0.0
    for at in ready:
        latest = max(latest, at)
        out.append(latest)
    return tuple(out)
