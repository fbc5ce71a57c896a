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
from ..model import ComputeSource, Trace
from ..costs import CostModel
from ..planning import OptionValues, compare, make_plan
from ..planning.observed import AS_RUN, as_run_prediction
from ..planning.inputs import left_out_notice
from ..planning.plan import CompareRow
from .compute import ComputeRequest, inputs, profile_for
from .cost import CostRequest
from .observed import as_run, cost_for, from_run
from .planned import Planned


__all__ = ["prepare", "plan_trace", "compare_trace", "Inspected", "inspect_trace", "gradient_details"]


def prepare(trace: Trace, compute: ComputeRequest, cost: Union[CostModel, CostRequest]) -> Planned:
    model, notices = cost_for(trace, cost)
    ready, profile, inp = inputs(trace, compute)
    left_out = left_out_notice(inp)
    return Planned(trace, ready, profile, inp, model,
                   notices=tuple(notices) + ((left_out,) if left_out else ()))


def plan_trace(trace: Trace, strategy: str, options: OptionValues, compute: ComputeRequest,
               cost: Union[CostModel, CostRequest]) -> Planned:
    if from_run(strategy):
        return as_run(trace, compute, cost)
    planned = prepare(trace, compute, cost)
    return replace(planned, plan=make_plan(planned.inp, strategy, options, planned.cost))


def compare_trace(trace: Trace, options: OptionValues, compute: ComputeRequest,
                  cost: Union[CostModel, CostRequest]) -> Planned:
    """Every strategy and each framework tuned, all under one model; on a trace that
    recorded its collectives, the run's own buckets under that model ("as run (model)",
    the reference of every gain) and, at the run's own world size only, as measured."""
    planned = prepare(trace, compute, cost)
    rows = compare(planned.inp, planned.cost, options)
    run = None
    if trace.collectives():
        try:
            run = as_run(trace, compute, CostRequest(planned.cost.gpus) if isinstance(
                cost, CostRequest) else planned.cost).plan
        except (PlanError, CostModelError) as exc:
            planned = replace(planned, notices=planned.notices + (f"no as-run row: {exc.message}",))
    front = []
    if run is not None and planned.inp.fsdp is not None:  # the run's own FSDP configuration
        front.append(CompareRow("as run (model)", replace(
            make_plan(planned.inp, planned.inp.fsdp.system, {}, planned.cost), strategy=AS_RUN)))
    elif run is not None and all(b.members for b in run.buckets) and run.inp == planned.inp:
        front.append(CompareRow("as run (model)", as_run_prediction(run, planned.cost)))
    if run is not None and run.cost.gpus == planned.cost.gpus:
        front.insert(0, CompareRow("as run (measured)", run))
    elif run is not None:
        planned = replace(planned, notices=planned.notices + (
            f"the run was measured on {run.cost.gpus} ranks: on {planned.cost.gpus} GPUs every "
            "row is a prediction, and the measurement is not compared",))
    rows = front + rows
    best = next(r for r in rows if not r.plan.measured and r.label != "as run (model)")
    return replace(planned, plan=best.plan, rows=rows,
                   as_run=run if run is not None and run.cost.gpus == planned.cost.gpus else None)


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
