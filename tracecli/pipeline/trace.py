"""The whole chain for one request: trace -> readiness -> compute times -> plan.

The CLI and replay call this; each step stays a pure function in its own package. What
the user should hear about (a fallback, an ignored option) comes back as ``notices``;
the library never prints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Union

from ..analysis import SizeReport, readiness, size_report
from ..analysis.readiness import Readiness
from ..analysis.shapes import infer_shapes
from ..errors import CostModelError, PlanError
from ..model import CHECKPOINT_NOTE, ComputeSource, Trace
from ..costs import CostModel
from ..planning import OptionValues, compare, make_plan
from ..planning.advice import compare_advice, plan_advice
from ..planning.plan import BucketPlan
from ..planning.observed import AS_RUN, as_run_prediction
from ..planning.inputs import left_out_notice
from ..planning.plan import CompareRow
from .compute import ComputeRequest, inputs, profile_for
from .cost import CostRequest
from .ddp_run import ddp_setup, with_mode
from .observed import as_run, cost_for, from_run
from .planned import Planned


__all__ = ["prepare", "plan_trace", "compare_trace", "Inspected", "inspect_trace", "gradient_details"]


def prepare(trace: Trace, compute: ComputeRequest, cost: Union[CostModel, CostRequest]) -> Planned:
    model, notices = cost_for(trace, cost)
    ready, profile, inp = inputs(trace, compute)
    left_out = left_out_notice(inp)
    # which of the trace's leaves were planned as gradients when some may be activations
    doubt = tuple(n for n in trace.meta.notes if n.startswith(CHECKPOINT_NOTE))
    return Planned(trace, ready, profile, inp, model,
                   notices=tuple(notices) + ((left_out,) if left_out else ()) + doubt)


def _setup(planned: Planned, options: OptionValues, strategies) -> tuple[Planned, dict]:
    """DDP as the trace shows it: the model's parameters on the planner's input, its mode in
    the options (said where a ddp plan is made)."""
    inp, mode = ddp_setup(planned.trace, planned.ready, planned.inp)
    options, said = with_mode(options, mode)
    return replace(planned, inp=inp,
                   notices=planned.notices + (said if "ddp" in strategies else ())), options


def plan_trace(trace: Trace, strategy: str, options: OptionValues, compute: ComputeRequest,
               cost: Union[CostModel, CostRequest], *, advise: bool = True) -> Planned:
    """``strategy``'s plan of ``trace``, with its advice (every other strategy and each
    framework tuned, under the same model: most of the work) unless ``advise`` is false."""
    if from_run(strategy):
        return as_run(trace, compute, cost)
    planned, options = _setup(prepare(trace, compute, cost), options, (strategy,))
    plan = make_plan(planned.inp, strategy, options, planned.cost)
    if not advise:
        return replace(planned, plan=plan)
    run, _ = _run(trace, compute, cost, planned)  # the advice's reference, where it can be
    advice = plan_advice(plan, trace.abilities.framework, options, _run_model(run, planned))
    return replace(planned, plan=plan, advice=advice)


def _run(trace: Trace, compute: ComputeRequest, cost: Union[CostModel, CostRequest],
         planned: Planned) -> tuple[Optional[BucketPlan], tuple[str, ...]]:
    """The run's own buckets, measured, where the trace recorded its collectives (with a
    notice where they cannot be planned)."""
    if not trace.collectives():
        return None, ()
    try:
        return as_run(trace, compute, CostRequest(planned.cost.gpus) if isinstance(
            cost, CostRequest) else planned.cost).plan, ()
    except (PlanError, CostModelError) as exc:
        return None, (f"no as-run row: {exc.message}",)


def _run_model(run: Optional[BucketPlan], planned: Planned) -> Optional[BucketPlan]:
    """The run's own buckets predicted under the plan's model ("as run (model)"), where
    every bucket is matched to its gradients."""
    if run is not None and planned.inp.fsdp is not None:  # the run's own FSDP configuration
        return replace(make_plan(planned.inp, planned.inp.fsdp.system, {}, planned.cost),
                       strategy=AS_RUN)
    if run is not None and all(b.members for b in run.buckets) and run.inp == planned.inp:
        return as_run_prediction(run, planned.cost)
    return None


def compare_trace(trace: Trace, options: OptionValues, compute: ComputeRequest,
                  cost: Union[CostModel, CostRequest]) -> Planned:
    """Every strategy and each framework tuned, all under one model; on a trace that
    recorded its collectives, the run's own buckets under that model ("as run (model)",
    the reference of every gain) and, at the run's own world size only, as measured."""
    planned, options = _setup(prepare(trace, compute, cost), options, ("ddp",))
    rows = compare(planned.inp, planned.cost, options)
    run, said = _run(trace, compute, cost, planned)
    planned = replace(planned, notices=planned.notices + said)
    front = []
    model = _run_model(run, planned)
    if model is not None:
        front.append(CompareRow("as run (model)", model))
    if run is not None and run.cost.gpus == planned.cost.gpus:
        front.insert(0, CompareRow("as run (measured)", run))
    elif run is not None:
        planned = replace(planned, notices=planned.notices + (
            f"the run was measured on {run.cost.gpus} ranks: on {planned.cost.gpus} GPUs every "
            "row is a prediction, and the measurement is not compared",))
    rows = front + rows
    best = next(r for r in rows if not r.plan.measured and r.label != "as run (model)")
    return replace(planned, plan=best.plan, rows=rows,
                   as_run=run if run is not None and run.cost.gpus == planned.cost.gpus else None,
                   advice=compare_advice(rows, trace.abilities.framework, options))


@dataclass(frozen=True)
class Inspected:
    """What ``inspect`` reports of a trace: readiness, sizes, and per gradient its shape and
    ready time (``details``, with the compute model's ``source``)."""

    trace: Trace
    ready: Readiness
    sizes: SizeReport
    details: dict
    source: Optional[str]


def inspect_trace(trace: Trace, compute: ComputeRequest) -> Inspected:
    ready = readiness(trace)
    sizes = size_report(trace, ready)
    details, source = gradient_details(trace, ready, compute)
    return Inspected(trace, ready, sizes, details, source)


def gradient_details(trace: Trace, ready: Readiness, compute: ComputeRequest) -> tuple[dict, Optional[str]]:
    """Per gradient: its inferred shape and its ready time (ms) under the compute model.

    Returns ``({tensor id: {"shape", "ready_ms"}}, compute source or None)``. Traces without
    timings and without ``--backward-ms``/``--op-times`` have no ready times; that is not an
    error here.
    """
    shapes = infer_shapes(trace).shapes if trace.abilities.infers_shapes else {}
    try:
        profile = profile_for(trace, ready, compute)
    except PlanError:
        if trace.abilities.compute is not ComputeSource.NONE:
            raise
        profile = None
    details = {}
    for g in ready.gradients:
        shape = g.shape if g.shape is not None else shapes.get(g.tensor_id)
        details[g.tensor_id] = {
            "shape": list(shape) if shape is not None else None,
            "ready_ms": profile.ready_at(g.backward_position) if profile else None,
        }
    return details, profile.source if profile else None
