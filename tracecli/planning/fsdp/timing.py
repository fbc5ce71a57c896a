"""An FSDP step on the schedule (DESIGN 4.3): compute spans on one stream, all-gathers,
reduce-scatters and HSDP all-reduces on channels of their own, compute waiting for the
all-gather it needs; and the memory its parameters and gradients hold.

A collective's time is the cost model's for its kind and bytes on its group: an
all-gather's bytes are one rank's share (its output over the group), a reduce-scatter's its
whole input, an all-reduce's its tensor; a group smaller than the plan's GPUs (HSDP's
shard and replicate groups, an int ``reshard_after_forward``) is costed on its own ranks.
"""

from __future__ import annotations

from ...costs import CostModel
from ...model import DTYPE_BYTES, CollectiveKind
from ..schedule import Comm, Span, Step, StepTimes, run
from ..timeline import BucketTiming, Timeline, timeline_of
from .details import Memory, channel_of
from .rules import Issue, Schedule
from .setup import Setup

__all__ = ["fsdp_timeline", "cost_bytes", "memory_of", "master_dtype"]


def cost_bytes(kind: CollectiveKind, elements: int, dtype: str, group: int) -> int:
    """The bytes the cost model is asked about (see the module's docstring)."""
    nbytes = elements * DTYPE_BYTES.get(dtype, 4)
    return nbytes // max(group, 1) if kind is CollectiveKind.ALL_GATHER else nbytes


def master_dtype(setup: Setup) -> str:
    """The sharded parameters' dtype: float32 under a low-precision ``param_dtype``."""
    return "float32" if DTYPE_BYTES.get(setup.param_dtype, 4) < 4 else setup.param_dtype


def memory_of(setup: Setup, sched: Schedule, sizes: dict) -> Memory:
    """Per rank: the sharded parameters and reduced gradients every rank keeps, and that
    plus the most unsharded bytes the schedule held at once."""
    item = DTYPE_BYTES.get(master_dtype(setup), 4)
    sharded = sum((ag + rs) // setup.shard * item for ag, rs in sizes.values())
    return Memory(sharded, sharded + sched.peak_bytes)


def fsdp_timeline(setup: Setup, sched: Schedule, cost: CostModel, members: dict,
                  update_ms: float = 0.0) -> tuple[Timeline, StepTimes]:
    """The step's timeline under ``cost`` (buckets: the collectives in issue order)."""
    models: dict[int, CostModel] = {}

    def model(group: int) -> CostModel:
        if group not in models:
            models[group] = cost if group == cost.gpus else cost.on(group)
        return models[group]

    comms, times_of = [], {}
    for issue in sched.issues:
        nbytes = cost_bytes(issue.kind, issue.elements, issue.dtype, issue.group)
        comm = Comm(issue.kind, nbytes, channel_of(issue.kind), after=issue.after,
                    follows=issue.follows)
        m = model(issue.group)
        times_of[id(comm)] = (m.time_ms(issue.kind, nbytes, False), m.time_ms(issue.kind, nbytes, True))
        comms.append(comm)
    spans = tuple(Span(ms, waits) for ms, waits in zip(sched.spans, sched.waits))
    times = run(Step(spans, tuple(comms), update_ms),
                lambda comm, queued: times_of[id(comm)][1 if queued else 0])
    timings = tuple(_timing(k, issue, t, members) for k, (issue, t)
                    in enumerate(zip(sched.issues, times.comms)))
    forward = _forward_end(setup, times)
    return timeline_of(timings, forward, times.compute_end_ms, update_ms, times), times


def _timing(k: int, issue: Issue, t, members: dict) -> BucketTiming:
    return BucketTiming(k, members.get(issue.unit, ()),
                        issue.elements * DTYPE_BYTES.get(issue.dtype, 4), issue.dtype,
                        t.ready_ms, t.start_ms, t.end_ms, issue.kind, issue.phase, issue.unit,
                        issue.elements, channel_of(issue.kind), issue.group)


def _forward_end(setup: Setup, times: StepTimes) -> float:
    """When the last compute span before the first backward hook ended."""
    spans = 0
    for mark in setup.program:
        if mark.kind in ("pre_backward", "post_backward"):
            break
        if mark.kind == "compute":
            spans += 1
    ends = times.span_end_ms
    return ends[spans - 1] if 0 < spans <= len(ends) else 0.0
