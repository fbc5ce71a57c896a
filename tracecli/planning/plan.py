"""Plans: a strategy's buckets, their predicted timeline, and the framework settings.

``make_plan`` is a pure function of the gradients (readiness order, sizes, ready times),
the compute times, the cost model and the options; each strategy's spec
(:mod:`.strategies`) groups the gradients and says what to set in its framework.
``compare`` runs every strategy and tunes each framework's own knobs over its spec's grid.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .base import Grouping, PlanInput
from .planfile import plan_document
from ..costs import CostModel
from ..model import CollectiveKind
from .spec import per_bucket_caps
from .spec import NoOptions, Options
from .strategies import STRATEGIES, planned_spec, predicted
from .timeline import Timeline, lower_bound, simulate

__all__ = ["PlanInput", "BucketPlan", "make_plan", "compare", "CompareRow", "settings_for",
           "is_default", "fixed_plan", "options_for"]


@dataclass(frozen=True)
class BucketPlan:
    strategy: str
    options: Options  # the strategy's own options record
    cost: CostModel
    inp: PlanInput
    timeline: Timeline
    lower_bound_ms: float
    settings: dict[str, Any]
    notes: tuple[str, ...] = ()  # what the reader must know (unmatched buckets, ...)
    measured: bool = False  # the timeline was measured (the as-run plan), not predicted
    fsdp: Any = None  # a sharded (FSDP) plan's units, settings and memory (planning.fsdp)

    @property
    def buckets(self):
        return self.timeline.buckets

    def tensor_names(self, k: int) -> list[str]:
        return [self.inp.grads[i].name for i in self.timeline.buckets[k].members]

    def to_json(self) -> dict[str, Any]:
        """The ``plan-buckets --json`` document, also the plan file replay reads."""
        return plan_document(self)


def make_plan(inp: PlanInput, strategy: str, options, cost: CostModel) -> BucketPlan:
    """``strategy``'s plan of ``inp`` under ``cost`` with ``options``: the strategy's options
    record, or a mapping of knob values (:meth:`~.spec.StrategySpec.options_of`)."""
    spec = planned_spec(strategy)
    options = spec.options_of(options)
    if spec.inputs is not None:
        options = spec.inputs(options, inp)
    if spec.planner is not None:
        return spec.planner(inp, options, cost)
    grouping = spec.group(inp.grads, options, cost)
    timeline = simulate(inp.grads, grouping, cost, inp.forward_ms, inp.backward_end_ms,
                        inp.update_ms)
    bound = lower_bound(inp.grads, cost, inp.backward_end_ms, inp.update_ms)
    plan = BucketPlan(strategy, options, cost, inp, timeline, bound, {},
                      _notes(timeline) + tuple(grouping.notes))
    return replace(plan, settings=settings_for(plan))


def fixed_plan(inp: PlanInput, buckets, strategy: str, options, cost: CostModel,
               collectives=None, messages=None) -> BucketPlan:
    """A given grouping (a plan file's, the run's own) predicted under ``cost``;
    ``messages``: each bucket's ``(bytes, dtype)`` where not its gradients' (padding)."""
    options = options_for(strategy, options)
    timeline = simulate(inp.grads, Grouping([tuple(b) for b in buckets], None,
                                            list(collectives) if collectives else None,
                                            list(messages) if messages else None),
                        cost, inp.forward_ms, inp.backward_end_ms, inp.update_ms)
    bound = lower_bound(inp.grads, cost, inp.backward_end_ms, inp.update_ms)
    plan = BucketPlan(strategy, options, cost, inp, timeline, bound, {}, _notes(timeline))
    return replace(plan, settings=settings_for(plan))


def options_for(strategy: str, options) -> Options:
    """``strategy``'s options record from ``options`` (a record, or a mapping of knob values);
    a strategy tracecli does not know (a plan file's) reads no knobs."""
    spec = STRATEGIES.get(strategy)
    if spec is not None:
        return spec.options_of(options)
    return options if isinstance(options, Options) else NoOptions()


def _notes(timeline: Timeline) -> tuple[str, ...]:
    gathered = [b for b in timeline.buckets if b.collective is CollectiveKind.ALL_GATHER]
    if not gathered:
        return ()
    one = len(gathered) == 1
    return (f"{len(gathered)} sparse gradient{'' if one else 's'} {'is' if one else 'are'} "
            f"all-gathered on {'its' if one else 'their'} own (as Horovod and DDP do), each rank's "
            "share taken as the dense size: an upper bound when batches touch few rows; "
            "--sparse-as-dense fuses them instead",)


def settings_for(plan: BucketPlan) -> dict[str, Any]:
    """What to set in the user's framework to get this plan (where one can): its
    strategy's settings; a strategy unknown here (a plan file's) is a partition to
    reproduce with DDP's per-bucket caps."""
    spec = STRATEGIES.get(plan.strategy)
    return spec.settings(plan) if spec is not None else per_bucket_caps(plan)


def is_default(plan: BucketPlan) -> bool:
    """True when ``plan`` uses its framework's default settings."""
    spec = STRATEGIES.get(plan.strategy)
    return spec is not None and spec.is_default(plan.options)


@dataclass(frozen=True)
class CompareRow:
    label: str
    plan: BucketPlan


def _best(plans: list[BucketPlan]) -> BucketPlan:
    return min(plans, key=lambda p: (round(p.timeline.iteration_ms, 9), len(p.buckets)))


def compare(inp: PlanInput, cost: CostModel, given, names=None) -> list[CompareRow]:
    """Every predicted strategy (or those ``names``) that plans this input (``applies``),
    with the options ``given`` (a mapping of knob values: each strategy reads its own), plus
    each framework tuned over its spec's grid, plus its defaults where the options given are
    not them; best first."""
    specs = [STRATEGIES[name] for name in (names if names is not None else predicted())]
    specs = [spec for spec in specs if spec.applies is None or spec.applies(inp)]
    options = {spec.name: spec.options_of(given) for spec in specs}
    rows = [CompareRow(spec.name, make_plan(inp, spec.name, options[spec.name], cost))
            for spec in specs]
    for spec in specs:
        if spec.rows is not None:
            rows.extend(CompareRow(label, plan) for label, plan in
                        spec.rows(inp, options[spec.name], cost))
        elif spec.tuning is not None:
            tuned = [make_plan(inp, spec.name, o, cost)
                     for o in spec.tuning(inp, options[spec.name])]
            rows.append(CompareRow(f"{spec.name} tuned", _best(tuned)))
    for spec in specs:  # what the framework does out of the box, for comparison
        if spec.defaults is None or any(is_default(r.plan) for r in rows
                                        if r.plan.strategy == spec.name):
            continue
        rows.append(CompareRow(f"{spec.name} default", make_plan(
            inp, spec.name, spec.out_of_the_box(options[spec.name]), cost)))
    rows = _never_beaten(rows, inp, cost)
    rows.sort(key=lambda r: (round(r.plan.timeline.iteration_ms, 9), len(r.plan.buckets), r.label))
    return rows


def _never_beaten(rows: list[CompareRow], inp: PlanInput, cost: CostModel) -> list[CompareRow]:
    """No row labelled ``optimal`` is beaten. Where the search was bounded (its plan says so)
    and another row's buckets, launched as they become ready, are faster, the optimal row
    takes them; where only a plan that delays its launches is faster (Horovod's cycle, under a
    model that times a queued bucket faster than one started alone), the row is labelled
    ``optimal (bounded)``."""
    k = next((i for i, r in enumerate(rows) if r.label == "optimal"), None)
    if k is None:
        return rows
    ours = rows[k].plan

    def faster(plan: BucketPlan) -> bool:
        return plan.timeline.iteration_ms < ours.timeline.iteration_ms - 1e-9 * max(
            1.0, ours.timeline.iteration_ms) and all(b.members for b in plan.buckets)

    beat = [r for r in rows if faster(r.plan)]
    if not beat:
        return rows
    at_once = [r for r in beat if not _delayed(r.plan) and not _split(r.plan)]
    label, plan = "optimal", ours
    if at_once:
        row = min(at_once, key=lambda r: r.plan.timeline.iteration_ms)
        best = row.plan
        taken = fixed_plan(inp, [b.members for b in best.buckets], ours.strategy, ours.options, cost,
                           [b.collective for b in best.buckets],
                           [(b.nbytes, b.dtype) for b in best.buckets])
        gap = ours.timeline.iteration_ms - taken.timeline.iteration_ms
        dense = any(len(b.members) > 1 and any(inp.grads[i].sparse for i in b.members)
                    for b in best.buckets)
        why = (" (they reduce a sparse gradient as dense, which --sparse-as-dense lets optimal "
               "search too)" if dense else "")
        plan = replace(taken, notes=ours.notes + (
            f"the buckets of the {row.label} row are {gap:.3f} ms faster under this model than "
            f"the search's{why}, and are taken",))
        ours = plan
    still = [r.plan for r in rows if faster(r.plan)]
    if still:
        label = "optimal (bounded)"
    if any(_delayed(p) for p in still):
        plan = replace(plan, notes=plan.notes + (
            "a plan that delays its launches is faster under this model (it times a bucket "
            "queued behind another faster than one started alone); the search launches each "
            "bucket once its gradients are ready",))
    if any(_split(p) for p in still):
        plan = replace(plan, notes=plan.notes + (
            "a plan that sends a gradient as several collectives (DeepSpeed's flush of a "
            "parameter past reduce_bucket_size, in the pieces its ZeRO partitions cut) is "
            "faster under this model; the search sends each gradient whole, as DDP can",))
    return rows[:k] + [CompareRow(label, plan)] + rows[k + 1:]


def _split(plan: BucketPlan) -> bool:
    """Whether a bucket of ``plan`` is sent as several collectives (DeepSpeed's pieces)."""
    return any(b.pieces for b in plan.timeline.buckets)


def _delayed(plan: BucketPlan) -> bool:
    """Whether a bucket of ``plan`` is launched after its last gradient is ready."""
    grads = plan.inp.grads
    return any(b.ready_ms > max(grads[i].ready_ms for i in b.members) + 1e-12 for b in plan.buckets)
