"""The whole chain for one request: trace -> readiness -> compute times -> plan.

The CLI and replay call this; each step stays a pure function in its own package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .analysis import readiness
from .analysis.compute import ComputeProfile, compute_profile, load_op_times
from .analysis.readiness import Readiness
from .analysis.shapes import infer_shapes
from .errors import PlanError
from .model import ComputeSource, Trace
from .planning import CostModel, PlanInput, StrategyOptions, compare, make_plan, resolve_cost_model
from .planning.inputs import plan_input
from .planning.plan import BucketPlan, CompareRow

__all__ = ["ComputeRequest", "CostRequest", "Planned", "plan_trace", "compare_trace",
           "prepare", "inputs", "gradient_details", "replay_job"]


@dataclass(frozen=True)
class ComputeRequest:
    device: str = "h100"
    op_times: Optional[str] = None
    backward_ms: Optional[float] = None
    forward_ms: Optional[float] = None
    update_ms: float = 0.0


@dataclass(frozen=True)
class CostRequest:
    gpus: int = 8
    network: Optional[str] = None
    algorithm: str = "ring"
    alpha_us: Optional[float] = None
    bandwidth_gbps: Optional[float] = None
    launch_us: float = 0.0
    calibration: Optional[str] = None

    def model(self) -> CostModel:
        return resolve_cost_model(self.gpus, self.network, self.alpha_us, self.bandwidth_gbps,
                                  self.calibration, self.algorithm, self.launch_us)


@dataclass(frozen=True)
class Planned:
    trace: Trace
    ready: Readiness
    profile: ComputeProfile
    inp: PlanInput
    cost: CostModel
    plan: Optional[BucketPlan] = None
    rows: list[CompareRow] = field(default_factory=list)

    def backward_names(self) -> list[tuple[str, float]]:
        """(op name, ms) of the backward ops in execution order, for timelines."""
        return [(self.trace.op(op_id).name, ms) for op_id, ms in self.profile.backward]


def inputs(trace: Trace, compute: ComputeRequest) -> tuple[Readiness, ComputeProfile, PlanInput]:
    """Readiness, compute profile and the planner's input for ``trace``."""
    ready = readiness(trace)
    times = load_op_times(compute.op_times) if compute.op_times else None
    profile = compute_profile(trace, ready, compute.device, times, compute.backward_ms,
                              compute.forward_ms)
    return ready, profile, plan_input(trace, ready, profile, compute.update_ms)


def prepare(trace: Trace, compute: ComputeRequest, cost: CostModel) -> Planned:
    ready, profile, inp = inputs(trace, compute)
    return Planned(trace, ready, profile, inp, cost)


def plan_trace(trace: Trace, strategy: str, options: StrategyOptions, compute: ComputeRequest,
               cost: CostModel) -> Planned:
    planned = prepare(trace, compute, cost)
    return Planned(**{**planned.__dict__, "plan": make_plan(planned.inp, strategy, options, cost)})


def compare_trace(trace: Trace, options: StrategyOptions, compute: ComputeRequest,
                  cost: CostModel) -> Planned:
    planned = prepare(trace, compute, cost)
    rows = compare(planned.inp, cost, options)
    return Planned(**{**planned.__dict__, "plan": rows[0].plan, "rows": rows})


def gradient_details(trace: Trace, ready: Readiness, compute: ComputeRequest) -> tuple[dict, Optional[str]]:
    """Per gradient: its inferred shape (Chainer) and estimated ready time (ms).

    Returns ``({tensor id: {"shape", "ready_ms"}}, compute source or None)``. Op lists
    without ``--backward-ms``/``--op-times`` have no ready times; that is not an error here.
    """
    shapes = infer_shapes(trace).shapes if trace.abilities.infers_shapes else {}
    times_file = load_op_times(compute.op_times) if compute.op_times else None
    try:
        profile = compute_profile(trace, ready, compute.device, times_file, compute.backward_ms,
                                  compute.forward_ms)
    except PlanError:
        if trace.abilities.compute is not ComputeSource.NONE:
            raise
        profile = None
    times = profile.ready_times() if profile else None
    details = {}
    for g in ready.gradients:
        shape = g.shape if g.shape is not None else shapes.get(g.tensor_id)
        details[g.tensor_id] = {
            "shape": list(shape) if shape is not None else None,
            "ready_ms": times[min(g.backward_position, len(times) - 1)] if times else None,
        }
    return details, profile.source if profile else None


def replay_job(inp: PlanInput, strategy: str, options: StrategyOptions, cost: CostRequest,
               iters: int, warmup: int, fixed=None, baseline: bool = False):
    """The replay of ``inp``. Its prediction uses ``cost`` when that names an interconnect
    (calibration profile, network preset or overrides); otherwise the ranks calibrate in
    place first, over sizes up to everything in one bucket."""
    from .replay.jobs import ReplayJob, Sweep

    explicit = any(v is not None for v in (cost.calibration, cost.network, cost.alpha_us,
                                            cost.bandwidth_gbps))
    model = cost.model() if explicit else None
    return ReplayJob(inp, strategy, options, model,
                     model.source if model else "in-place calibration", iters, warmup, fixed,
                     sweep=Sweep.covering(sum(g.nbytes for g in inp.grads)), baseline=baseline)
