"""The whole chain for one request: trace -> readiness -> compute times -> plan.

The CLI and replay call this; each step stays a pure function in its own package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .analysis import readiness
from .analysis.compute import ComputeProfile, compute_profile, load_op_times
from .analysis.readiness import Readiness
from .model import Trace
from .planning import CostModel, PlanInput, StrategyOptions, compare, make_plan, resolve_cost_model
from .planning.inputs import plan_input
from .planning.plan import BucketPlan, CompareRow

__all__ = ["ComputeRequest", "CostRequest", "Planned", "plan_trace", "compare_trace",
           "prepare"]


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


def prepare(trace: Trace, compute: ComputeRequest, cost: CostModel) -> Planned:
    ready = readiness(trace)
    times = load_op_times(compute.op_times) if compute.op_times else None
    profile = compute_profile(trace, ready, compute.device, times, compute.backward_ms,
                              compute.forward_ms)
    return Planned(trace, ready, profile, plan_input(trace, ready, profile, compute.update_ms), cost)


def plan_trace(trace: Trace, strategy: str, options: StrategyOptions, compute: ComputeRequest,
               cost: CostModel) -> Planned:
    planned = prepare(trace, compute, cost)
    return Planned(**{**planned.__dict__, "plan": make_plan(planned.inp, strategy, options, cost)})


def compare_trace(trace: Trace, options: StrategyOptions, compute: ComputeRequest,
                  cost: CostModel) -> Planned:
    planned = prepare(trace, compute, cost)
    rows = compare(planned.inp, cost, options)
    return Planned(**{**planned.__dict__, "plan": rows[0].plan, "rows": rows})
