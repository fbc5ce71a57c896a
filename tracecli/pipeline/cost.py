"""The cost model of a request on a trace: what the trace timed of its own all-reduces,
handed to the one resolver (:func:`tracecli.costs.resolve.resolve`)."""

from __future__ import annotations

from typing import Optional

from ..analysis.observed import measured_allreduces
from ..costs import CostModel
from ..costs.resolve import DEFAULT_GPUS, CostRequest, TraceTimes, resolve
from ..costs.tracefit import trace_fit
from ..model import Trace

__all__ = ["DEFAULT_GPUS", "CostRequest", "trace_cost", "resolve_cost", "trace_times"]


def trace_times(trace: Trace) -> TraceTimes:
    """The gradient all-reduces ``trace`` timed (every step), their ranks and backend."""
    points, ranks, backend = measured_allreduces(trace)
    world = trace.step.world_size if trace.step is not None else None
    return TraceTimes(tuple(points), ranks, backend, world or None)


def trace_cost(trace: Trace, gpus: int, algorithm: str = "ring",
               launch_us: float = 0.0) -> tuple[Optional[CostModel], Optional[str]]:
    """The model fitted to the gradient all-reduces the trace timed, or why there is none."""
    return trace_fit(trace_times(trace), gpus, algorithm, launch_us)


def resolve_cost(trace: Optional[Trace], request: CostRequest,
                 default_gpus: int = DEFAULT_GPUS) -> tuple[CostModel, list[str]]:
    """The cost model for ``request`` on ``trace`` (see :mod:`tracecli.costs.resolve`),
    with the notices the user should see."""
    return resolve(request, trace_times(trace) if trace is not None else None, default_gpus)
