"""Plans: a strategy's buckets, their predicted timeline, and the framework settings.

``make_plan`` is a pure function of the gradients (readiness order, sizes, ready times),
the compute times, the cost model and the options. ``compare`` runs every strategy and
tunes each framework's own knobs for its best plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..errors import PlanError
from .base import (
    DDP_BUCKET_CAP, DDP_FIRST_BUCKET_BYTES, HOROVOD_THRESHOLD, FixedPlan, Grad, Grouping,
    PlanInput, StrategyOptions,
)
from .planfile import plan_document
from ..costs import CostModel
from ..model import CollectiveKind
from .strategies import STRATEGIES, ddp_limits
from .timeline import Timeline, lower_bound, simulate

__all__ = ["PlanInput", "BucketPlan", "make_plan", "compare", "CompareRow", "settings_for",
           "is_default", "fixed_plan"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class BucketPlan:
    strategy: str
    options: StrategyOptions
    cost: CostModel
    inp: PlanInput
    timeline: Timeline
    lower_bound_ms: float
    settings: dict[str, Any]
    notes: tuple[str, ...] = ()  # what the reader must know (unmatched buckets, ...)
    measured: bool = False  # the timeline was measured (the as-run plan), not predicted

    @property
    def buckets(self):
        return self.timeline.buckets

    def tensor_names(self, k: int) -> list[str]:
        return [self.inp.grads[i].name for i in self.timeline.buckets[k].members]

    def to_json(self) -> dict[str, Any]:
        """The ``plan-buckets --json`` document, also the plan file replay reads."""
        return plan_document(self)


def make_plan(inp: PlanInput, strategy: str, options: StrategyOptions, cost: CostModel) -> BucketPlan:
    if strategy not in STRATEGIES:
        raise PlanError(None, None, f"unknown strategy {strategy!r}; use one of "
                        + ", ".join(STRATEGIES))
    if options.max_bytes is not None and options.max_bytes <= 0:
        raise PlanError(None, None, "--max-bytes must be positive")
    options = replace(options, cost=cost)
    grouping = STRATEGIES[strategy](inp.grads, options)
    timeline = simulate(inp.grads, grouping, cost, inp.forward_ms, inp.backward_end_ms,
                        inp.update_ms)
    bound = lower_bound(inp.grads, cost, inp.backward_end_ms, inp.update_ms)
    plan = BucketPlan(strategy, options, cost, inp, timeline, bound, {}, _notes(timeline))
    return replace(plan, settings=settings_for(plan))


def fixed_plan(inp: PlanInput, buckets, strategy: str, options: StrategyOptions,
               cost: CostModel, collectives=None) -> BucketPlan:
    """A given grouping (a plan file's, the run's own) predicted under ``cost``."""
    timeline = simulate(inp.grads, Grouping([tuple(b) for b in buckets], None,
                                            list(collectives) if collectives else None),
                        cost, inp.forward_ms, inp.backward_end_ms, inp.update_ms)
    bound = lower_bound(inp.grads, cost, inp.backward_end_ms, inp.update_ms)
    plan = BucketPlan(strategy, replace(options, cost=cost), cost, inp, timeline, bound, {},
                      _notes(timeline))
    return replace(plan, settings=settings_for(plan))


def _notes(timeline: Timeline) -> tuple[str, ...]:
    gathered = [b for b in timeline.buckets if b.collective is CollectiveKind.ALL_GATHER]
    if not gathered:
        return ()
    one = len(gathered) == 1
    return (f"{len(gathered)} sparse gradient{'' if one else 's'} {'is' if one else 'are'} "
            f"all-gathered on {'its' if one else 'their'} own (as Horovod and DDP do), each rank's "
            "share taken as the dense size: an upper bound when batches touch few rows; "
            "--sparse-as-dense fuses them instead",)


def _mb(nbytes: int) -> str:
    value = nbytes / MiB
    return f"{value:g}" if value == int(value) else f"{value:.6f}".rstrip("0")


def settings_for(plan: BucketPlan) -> dict[str, Any]:
    """What to set in the user's framework to get this plan (where one can)."""
    o, name = plan.options, plan.strategy
    if name == "ddp":
        first, *rest = ddp_limits(o)
        cap = rest[0] if rest else first
        text = "DistributedDataParallel(model, bucket_cap_mb=%s)" % _mb(cap)
        if o.max_bytes is None:
            text = "DistributedDataParallel(model)  # defaults: bucket_cap_mb=25, first bucket 1 MiB"
        return {"framework": "pytorch-ddp", "bucket_cap_mb": cap / MiB,
                "first_bucket_bytes": first, "text": text}
    if name == "horovod":
        threshold = o.max_bytes if o.max_bytes is not None else HOROVOD_THRESHOLD
        text = f"export HOROVOD_FUSION_THRESHOLD={threshold} HOROVOD_CYCLE_TIME={o.cycle_ms:g}"
        if o.sparse_as_dense and any(g.sparse for g in plan.inp.grads):
            text += "  # and hvd.DistributedGradientTape(tape, sparse_as_dense=True)"
        return {"framework": "horovod", "HOROVOD_FUSION_THRESHOLD": threshold,
                "HOROVOD_CYCLE_TIME": o.cycle_ms, "sparse_as_dense": o.sparse_as_dense,
                "text": text}
    if name == "tf-spec":
        text = f"--all_reduce_spec={o.spec}"
        if o.agg_small_grads_max_bytes > 0:
            text += (f" --agg_small_grads_max_bytes={o.agg_small_grads_max_bytes}"
                     f" --agg_small_grads_max_group={o.agg_small_grads_max_group}")
        return {"framework": "tf_cnn_benchmarks", "all_reduce_spec": o.spec,
                "agg_small_grads_max_bytes": o.agg_small_grads_max_bytes,
                "agg_small_grads_max_group": o.agg_small_grads_max_group, "text": text}
    # Any contiguous partition in one dtype: DDP's per-bucket caps (torch >= 2.13) close
    # bucket k exactly when it holds its bytes.
    buckets = plan.timeline.buckets
    contiguous = all(b.members == tuple(range(b.members[0], b.members[-1] + 1)) for b in buckets)
    ordered = [m for b in buckets for m in b.members] == list(range(len(plan.inp.grads)))
    if contiguous and ordered and len({b.dtype for b in buckets}) == 1 and "mixed" not in {b.dtype for b in buckets}:
        caps = ", ".join(_mb(b.nbytes) for b in buckets)
        return {"framework": "pytorch-ddp", "bucket_cap_mb_list": [b.nbytes / MiB for b in buckets],
                "torch": ">=2.13",
                "text": f"DistributedDataParallel(model, bucket_cap_mb_list=[{caps}])  # torch >= 2.13"}
    return {"framework": None, "text": "no framework setting reproduces this plan"}


def is_default(plan: BucketPlan) -> bool:
    """True when ``plan`` uses its framework's default settings."""
    o = plan.options
    return o.max_bytes is None and o.first_bucket_bytes is None and (
        plan.strategy != "horovod" or o.cycle_ms == StrategyOptions().cycle_ms)


@dataclass(frozen=True)
class CompareRow:
    label: str
    plan: BucketPlan


def _candidates(grads: Sequence[Grad]) -> list[int]:
    """Powers of two from 64 KiB up to just past the total, plus the DDP/Horovod defaults."""
    total = sum(g.nbytes for g in grads)
    sizes, s = [], 64 * 1024
    while s < 2 * max(total, 1):
        sizes.append(s)
        s *= 2
    return sorted(set(sizes + [DDP_BUCKET_CAP, HOROVOD_THRESHOLD, DDP_FIRST_BUCKET_BYTES]))


def _best(plans: list[BucketPlan]) -> BucketPlan:
    return min(plans, key=lambda p: (round(p.timeline.iteration_ms, 9), len(p.buckets)))


def compare(inp: PlanInput, cost: CostModel, options: StrategyOptions) -> list[CompareRow]:
    """Every strategy with the given options, plus each framework tuned; best first."""
    rows = [CompareRow(name, make_plan(inp, name, options, cost)) for name in STRATEGIES]
    caps = _candidates(inp.grads)
    ddp = [make_plan(inp, "ddp", replace(options, max_bytes=c, first_bucket_bytes=None), cost)
           for c in caps]
    rows.append(CompareRow("ddp tuned", _best(ddp)))
    backward = inp.backward_end_ms - inp.forward_ms
    cycles = sorted({0.1, 0.5, 1.0, 2.0, 5.0} | {round(backward / k, 3) for k in (1, 2, 4, 8, 16, 32)
                                                 if backward / k >= 0.1})
    dense = (False, True) if any(g.sparse for g in inp.grads) else (options.sparse_as_dense,)
    horovod = [make_plan(inp, "horovod", replace(options, max_bytes=c, cycle_ms=cy,
                                                 sparse_as_dense=d), cost)
               for c in caps for cy in cycles for d in dense]
    rows.append(CompareRow("horovod tuned", _best(horovod)))
    tf = [make_plan(inp, "tf-spec", replace(options, spec=options.spec,
                                            agg_small_grads_max_bytes=b,
                                            agg_small_grads_max_group=g), cost)
          for b in [0] + caps for g in (4, 10, 16, 32, 64, 128)]
    rows.append(CompareRow("tf-spec tuned", _best(tf)))
    for name in ("ddp", "horovod"):  # what the framework does out of the box, for comparison
        if any(is_default(r.plan) for r in rows if r.plan.strategy == name):
            continue
        rows.append(CompareRow(f"{name} default", make_plan(inp, name, StrategyOptions(), cost)))
    rows.sort(key=lambda r: (round(r.plan.timeline.iteration_ms, 9), len(r.plan.buckets), r.label))
    return rows
