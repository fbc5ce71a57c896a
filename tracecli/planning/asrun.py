"""The as-run plan: the buckets a traced run used, with the times it measured.

Unlike the strategies, nothing here is predicted: each bucket's ready time is when the
run launched its all-reduce, its start and end when the all-reduce ran. The timeline's
totals follow the same definitions as a predicted one (DESIGN 4.3), so the two compare:
iteration = max(backward end, last all-reduce end) + update.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple, Sequence

from ..costs import CostModel
from ..errors import PlanError
from .plan import BucketPlan, PlanInput, fixed_plan, settings_for
from .strategies import StrategyOptions
from .strategies.observed import OBSERVED
from .timeline import BucketTiming, Timeline, lower_bound

__all__ = ["RunBucket", "as_run_plan", "as_run_prediction", "AS_RUN"]

AS_RUN = OBSERVED.name


class RunBucket(NamedTuple):
    members: tuple[int, ...]  # gradient indices; () when the trace cannot say
    nbytes: int
    dtype: str
    ready_ms: float  # launched
    start_ms: float
    end_ms: float


def as_run_plan(inp: PlanInput, buckets: Sequence[RunBucket], cost: CostModel,
                notes: Sequence[str] = ()) -> BucketPlan:
    if not buckets:
        raise PlanError(None, None, "the run has no gradient all-reduce to show")
    timings = tuple(BucketTiming(k, b.members, b.nbytes, b.dtype, b.ready_ms, b.start_ms, b.end_ms)
                    for k, b in enumerate(buckets))
    last = max(t.end_ms for t in timings)
    iteration = max(inp.backward_end_ms, last) + inp.update_ms
    compute = inp.backward_end_ms + inp.update_ms
    timeline = Timeline(timings, inp.forward_ms, inp.backward_end_ms, inp.update_ms, iteration,
                        compute, iteration - compute, sum(t.duration_ms for t in timings))
    bound = lower_bound(inp.grads, cost, inp.backward_end_ms, inp.update_ms)
    plan = BucketPlan(AS_RUN, StrategyOptions(), cost, inp, timeline, bound, {}, tuple(notes),
                      measured=True)
    return replace(plan, settings=settings_for(plan))


def as_run_prediction(plan: BucketPlan) -> BucketPlan:
    """The as-run grouping under the cost model: how far the model is from the run."""
    if not all(b.members for b in plan.buckets):
        raise PlanError(None, None, "the as-run buckets are not all matched to gradients")
    predicted = fixed_plan(plan.inp, [b.members for b in plan.buckets], AS_RUN, plan.options,
                           plan.cost)
    return replace(plan, timeline=predicted.timeline, measured=False)
