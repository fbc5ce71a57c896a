"""A trace's readiness and compute times, and the planner's input made from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..analysis import readiness
from ..analysis.compute import ComputeProfile, compute_profile
from ..parsers.op_times import load_op_times
from ..analysis.readiness import Readiness
from ..limits import DEFAULT_DEVICE
from ..model import Trace
from ..planning import PlanInput
from ..planning.inputs import plan_input

__all__ = ["ComputeRequest", "profile_for", "update_for", "inputs"]


@dataclass(frozen=True)
class ComputeRequest:
    device: str = DEFAULT_DEVICE
    op_times: Optional[str] = None
    backward_ms: Optional[float] = None
    forward_ms: Optional[float] = None
    update_ms: Optional[float] = None  # None: the trace's optimizer step, else 0


def profile_for(trace: Trace, ready: Readiness, compute: ComputeRequest) -> ComputeProfile:
    times = load_op_times(compute.op_times) if compute.op_times else None
    return compute_profile(trace, ready, compute.device, times, compute.backward_ms,
                           compute.forward_ms)


def update_for(compute: ComputeRequest, profile: ComputeProfile) -> float:
    if compute.update_ms is not None:
        return compute.update_ms
    return profile.update_ms or 0.0


def inputs(trace: Trace, compute: ComputeRequest) -> tuple[Readiness, ComputeProfile, PlanInput]:
    """Readiness, compute profile and the planner's input for ``trace``."""
    ready = readiness(trace)
    profile = profile_for(trace, ready, compute)
    return ready, profile, plan_input(trace, ready, profile, update_for(compute, profile))
