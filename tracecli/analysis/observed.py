"""The buckets a traced run really used: its gradient all-reduces matched to its gradients.

DDP has no bucket event; each bucket is one all-reduce whose element count is the sum of
its gradients', launched the moment its last gradient is ready, buckets in order. So, in
launch order, each gradient all-reduce of the traced step takes the earliest unassigned
gradients of its dtype (DDP buckets each dtype apart) until their elements add up to
the all-reduce's; all of them must have been ready before the launch. Without recorded
shapes the members are the unassigned gradients ready before the launch (DDP's rule), and
the report says so. An all-reduce that no such run of gradients adds up to (parameters
without a gradient under ``find_unused_parameters=True``, frozen parameters, a comm hook
that changes sizes) is reported as unmatched with the reason; matching stops there,
since every later assignment would rest on a guess.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ..model import Collective, CollectiveKind, EdgeKind, Link, Purpose, Trace
from .readiness import Readiness

__all__ = ["ObservedBucket", "ObservedRun", "observed_run", "measured_allreduces",
           "with_carried_by"]

_SLACK_MS = 1e-6


class ObservedBucket(NamedTuple):
    collective: Collective
    members: Optional[tuple[int, ...]]  # gradient indices (readiness order); None: unmatched
    note: Optional[str] = None


class ObservedRun(NamedTuple):
    step: Optional[int]
    buckets: tuple[ObservedBucket, ...]
    unassigned: tuple[int, ...]  # gradients in no matched bucket
    problems: tuple[str, ...]
    by_sizes: bool  # members checked by element sums (else by launch order only)

    @property
    def matched(self) -> bool:
        return bool(self.buckets) and all(b.members is not None for b in self.buckets) \
            and not self.unassigned


def _ready_ms(trace: Trace, ready: Readiness) -> list[float]:
    times = []
    for g in ready.gradients:
        op = trace.op(g.op) if g.op else None
        if op is None or op.start_ms is None or op.dur_ms is None:
            times.append(float("inf"))
        else:
            times.append(op.start_ms + op.dur_ms)
    return times


class _Matcher:
    """Each gradient all-reduce of the step, in launch order, takes the earliest unassigned
    gradients of its dtype ready before its launch (see the module's docstring)."""

    def __init__(self, grads, ready_at: list[float], by_sizes: bool):
        self.grads, self.ready_at, self.by_sizes = grads, ready_at, by_sizes
        self.queues: dict[Optional[str], list[int]] = {}
        for i, g in enumerate(grads):  # each dtype's gradients, in readiness order
            self.queues.setdefault(g.dtype if by_sizes else None, []).append(i)
        self.fronts = {key: 0 for key in self.queues}
        self.assigned: set[int] = set()
        self.buckets: list[ObservedBucket] = []
        self.problems: list[str] = []
        self.failed = False

    def take(self, k: int, c: Collective) -> None:
        if self.failed:
            self.buckets.append(ObservedBucket(c, None, "follows an unmatched all-reduce"))
            return
        key = c.dtype if self.by_sizes else None
        if self.by_sizes and key is None and len(self.queues) == 1:  # the trace gives no
            key = next(iter(self.queues))                             # dtype: its gradients' one
        queue, front = self.queues.get(key, []), self.fronts.get(key, 0)
        end = front
        while end < len(queue) and self.ready_at[queue[end]] <= c.launch_ms + _SLACK_MS:
            end += 1
        if self.by_sizes:
            self._by_size(k, c, key, queue, front, end)
        else:
            self._by_order(k, c, key, queue, front, end)

    def _assign(self, c: Collective, key, queue: list[int], front: int, stop: int,
                note: Optional[str] = None) -> None:
        members = tuple(queue[front:stop])
        self.fronts[key] = stop
        self.assigned.update(members)
        self.buckets.append(ObservedBucket(c, members, note))

    def _by_order(self, k: int, c: Collective, key, queue: list[int], front: int, end: int) -> None:
        if end == front:
            self.failed = True
            self.problems.append(f"all-reduce {k} was launched before any unassigned gradient "
                                 "was ready")
            self.buckets.append(ObservedBucket(c, None, "no gradient ready before its launch"))
            return
        self._assign(c, key, queue, front, end, "members from launch order (the trace records "
                                                "no shapes)")

    def _by_size(self, k: int, c: Collective, key, queue: list[int], front: int, end: int) -> None:
        grads = self.grads
        total, stop = 0, front
        padded = c.kind is CollectiveKind.REDUCE_SCATTER
        while stop < end and (total + grads[queue[stop]].elements <= c.elements if padded
                              else total < c.elements):
            total += grads[queue[stop]].elements
            stop += 1
        if (total == c.elements or (padded and total <= c.elements)) and stop > front:
            self._assign(c, key, queue, front, stop)
            return
        self.failed = True
        available = sum(grads[i].elements for i in queue[front:end])
        self.problems.append(
            f"all-reduce {k} ({c.elements:,} {c.dtype} elements) is no run of the "
            f"{end - front} unassigned {c.dtype} gradients ready before its launch "
            f"({available:,} elements): the bucket holds parameters without a gradient this "
            "step (find_unused_parameters=True, frozen parameters) or a comm hook changes "
            "its size")
        self.buckets.append(ObservedBucket(c, None, "no run of ready gradients adds up to it"))


def observed_run(trace: Trace, ready: Readiness) -> ObservedRun:
    """Match the traced step's gradient all-reduces to ``ready.gradients``."""
    step = trace.step.index if trace.step is not None else None
    collectives = [c for c in trace.collectives() if c.purpose is Purpose.GRADIENTS and c.step == step]
    grads = ready.gradients
    ready_at = _ready_ms(trace, ready)
    by_sizes = all(g.elements is not None and g.dtype is not None for g in grads) and \
        all(c.elements is not None for c in collectives)
    m = _Matcher(grads, ready_at, by_sizes)
    for k, c in enumerate(collectives):
        m.take(k, c)
    if by_sizes and not m.failed and collectives and len(m.assigned) < len(grads):
        _after_backward(trace, step, collectives[-1].launch_ms, grads, ready_at, m.queues,
                        m.fronts, m.assigned, m.buckets)
    unassigned = tuple(i for i in range(len(grads)) if i not in m.assigned)
    problems = m.problems
    if not collectives:
        problems.append("the traced step has no gradient all-reduce")
    elif unassigned and not m.failed:
        problems.append(f"{len(unassigned)} gradients are in no all-reduce of the step (e.g. "
                        f"{grads[unassigned[0]].name}): no_sync(), or a comm hook")
    return ObservedRun(step, tuple(m.buckets), unassigned, tuple(problems), by_sizes)


def measured_allreduces(trace: Trace) -> tuple[list[tuple[int, float]], Optional[int], Optional[str]]:
    """``(bytes, ms)`` of every gradient all-reduce the trace timed (all its steps), the rank
    count they spanned, and the backend: the points a cost model can be fitted to."""
    points, ranks = [], set()
    for c in trace.collectives():
        if c.purpose is Purpose.GRADIENTS and c.nbytes and c.start_ms is not None and c.end_ms is not None \
                and c.end_ms > c.start_ms:
            points.append((c.nbytes, c.end_ms - c.start_ms))
            if c.group_size:
                ranks.add(c.group_size)
    world = trace.step.world_size if trace.step is not None else None
    count = ranks.pop() if len(ranks) == 1 else world
    return points, count, trace.meta.backend


def _after_backward(trace, step, last_launch, grads, ready_at, queues, fronts, assigned,
                    buckets) -> None:
    """All-reduces launched after the step's last gradient all-reduce, outside backward
    (DeepSpeed's epilogue flush): a gradient bucket where, and only where, its elements are
    exactly those of the next ready gradients of its dtype; any other is left as it is."""
    for c in trace.collectives():
        if c.step != step or c.purpose is Purpose.GRADIENTS or c.elements is None \
                or c.kind is not CollectiveKind.ALL_REDUCE or c.launch_ms < last_launch:
            continue
        queue, front = queues.get(c.dtype, []), fronts.get(c.dtype, 0)
        total, stop = 0, front
        while stop < len(queue) and total < c.elements and ready_at[queue[stop]] <= c.launch_ms + _SLACK_MS:
            total += grads[queue[stop]].elements
            stop += 1
        if total == c.elements and stop > front:
            members = tuple(queue[front:stop])
            fronts[c.dtype] = stop
            assigned.update(members)
            buckets.append(ObservedBucket(c._replace(purpose=Purpose.GRADIENTS), members,
                                          "launched after backward (a flush at its end); its "
                                          "elements are exactly the next ready gradients'"))


def with_carried_by(trace: Trace) -> Trace:
    """``trace`` with a ``carried_by`` link from each gradient to the collective that
    reduced it in the run, as :func:`observed_run` matches them (only matched buckets: a
    gradient no collective could be matched to has none)."""
    if not any(c.purpose is Purpose.GRADIENTS for c in trace.collectives()):
        return trace
    from .readiness import readiness

    ready = readiness(trace)
    run = observed_run(trace, ready)
    return trace.with_links(Link(ready.gradients[i].tensor_id, b.collective.id, EdgeKind.CARRIED_BY)
                            for b in run.buckets if b.members for i in b.members)
