"""The as-run plan: the buckets a traced run used, with the times it measured.

Unlike the strategies, nothing here is predicted: each bucket's ready time is when the
run launched its all-reduce, its start and end when the all-reduce ran, on the run's own
ranks (never another count: that is a prediction). Its lower bound is compute alone (a
model's bound does not bound a measurement). The timeline's
totals follow the same definitions as a predicted one (DESIGN 4.3), so the two compare:
iteration = max(backward end, last all-reduce end) + update.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple, Optional, Sequence

from ..costs import CostModel
from ..errors import PlanError
from ..model import CollectiveKind
from .plan import BucketPlan, PlanInput, fixed_plan, settings_for
from .spec import NoOptions
from .strategies.observed import OBSERVED
from .schedule import CommTime, recorded
from .timeline import BucketTiming, timeline_of

__all__ = ["RunBucket", "as_run_plan", "as_run_prediction", "run_messages", "AS_RUN"]

AS_RUN = OBSERVED.name


class RunBucket(NamedTuple):
    members: tuple[int, ...]  # gradient indices; () when the trace cannot say
    nbytes: int
    dtype: str
    ready_ms: float  # launched
    start_ms: float
    end_ms: float
    collective: CollectiveKind = CollectiveKind.ALL_REDUCE  # a reduce-scatter: its whole input


def as_run_plan(inp: PlanInput, buckets: Sequence[RunBucket], cost: CostModel,
                notes: Sequence[str] = ()) -> BucketPlan:
    if not buckets:
        raise PlanError("the run has no gradient all-reduce to show")
    timings = tuple(BucketTiming(k, b.members, b.nbytes, b.dtype, b.ready_ms, b.start_ms, b.end_ms,
                                 b.collective) for k, b in enumerate(buckets))
    times = recorded(inp.backward_end_ms, [CommTime(b.ready_ms, b.start_ms, b.end_ms, False)
                                           for b in buckets], inp.update_ms)
    timeline = timeline_of(timings, inp.forward_ms, inp.backward_end_ms, inp.update_ms, times)
    # A measurement is bounded by what it measured, not by a model of it: compute alone.
    bound = times.compute_ms
    plan = BucketPlan(AS_RUN, NoOptions(), cost, inp, timeline, bound, {}, tuple(notes),
                      measured=True)
    return replace(plan, settings=settings_for(plan))


def run_messages(plan: BucketPlan) -> Optional[list[tuple[int, str]]]:
    """What each measured bucket sent, where a bucket sent more than its gradients
    (Megatron's padded reduce-scatters); ``None`` where every one sent exactly them."""
    grads = plan.inp.grads
    sent = [(b.nbytes, b.dtype) for b in plan.buckets]
    exact = all(n == sum(grads[i].nbytes for i in b.members) for (n, _), b in zip(sent, plan.buckets))
    return None if exact else sent


def as_run_prediction(plan: BucketPlan, cost: Optional[CostModel] = None) -> BucketPlan:
    """The as-run grouping predicted under ``cost`` (default: the plan's own model): how
    far the model is from the run, and the run as the strategies are compared."""
    if not all(b.members for b in plan.buckets):
        raise PlanError("the as-run buckets are not all matched to gradients")
    cost = cost if cost is not None else plan.cost
    predicted = fixed_plan(plan.inp, [b.members for b in plan.buckets], AS_RUN, plan.options,
                           cost, [b.collective for b in plan.buckets], run_messages(plan))
    return replace(plan, cost=cost, timeline=predicted.timeline, lower_bound_ms=predicted.lower_bound_ms,
                   measured=False)
