"""Which cost model a request gets: a calibration, a preset or overrides, a topology for
NCCL's model, or a fit to the trace's own collectives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..analysis.observed import measured_allreduces
from ..errors import CalibrationError, PlanError
from ..model import Trace
from ..costs import DEFAULT_NETWORK, CostModel, fit_ring, fitted_model, monotone, read_profile
from ..costs import resolve_cost_model, trimmed_mean
from ..costs.nccl.request import TopologyRequest, nccl_cost_model

__all__ = ["DEFAULT_GPUS", "CostRequest", "trace_cost", "resolve_cost"]


DEFAULT_GPUS = 8


@dataclass(frozen=True)
class CostRequest:
    """What the user asked of the cost model; ``gpus=None`` takes the calibration's or the
    trace's rank count, else 8."""

    gpus: Optional[int] = None
    network: Optional[str] = None
    algorithm: str = "ring"
    alpha_us: Optional[float] = None
    bandwidth_gbps: Optional[float] = None
    launch_us: float = 0.0
    calibration: Optional[str] = None
    topology: Optional[TopologyRequest] = None  # given: NCCL's model of this topology
    nccl_tests: Optional[str] = None  # nccl-tests output measured on it

    @property
    def explicit(self) -> bool:
        """True when it names an interconnect (profile, preset, overrides or a topology)."""
        return any(v is not None for v in (self.calibration, self.network, self.alpha_us,
                                           self.bandwidth_gbps, self.topology, self.nccl_tests))

    def model(self, default_gpus: int = DEFAULT_GPUS) -> CostModel:
        return resolve_cost(None, self, default_gpus)[0]


def trace_cost(trace: Trace, gpus: int, algorithm: str = "ring",
               launch_us: float = 0.0) -> tuple[Optional[CostModel], Optional[str]]:
    """alpha-beta fitted to the gradient all-reduces the trace measured, or why not."""
    points, ranks, backend = measured_allreduces(trace)
    if not points:
        return None, None
    sizes = sorted({n for n, _ in points})
    if ranks is None or ranks < 2:
        return None, ("the trace does not say how many ranks its all-reduces spanned; "
                      "cannot fit the cost model to them")
    if len(sizes) < 2:
        return None, (f"the trace's {len(points)} gradient all-reduces have {len(sizes)} "
                      "distinct size: too few to fit latency and bandwidth")
    try:
        fit = fit_ring(points, ranks)
    except CalibrationError as exc:
        return None, f"cannot fit the trace's all-reduces: {exc.message}"
    source = (f"fitted to {len(points)} gradient all-reduces in the trace ({len(sizes)} sizes, "
              f"{ranks} ranks{', ' + backend if backend else ''}): R²={fit.r2:.4f}, "
              f"MAPE {fit.mape_pct:.1f}%")
    quality = {"r2": fit.r2, "mape_pct": fit.mape_pct, "points": len(points), "sizes": len(sizes),
               "ranks": ranks, "poor": fit.poor}
    poor = None
    if fit.poor:
        poor = (f"the alpha-beta fit to the trace's all-reduces is poor (R²={fit.r2:.2f}, MAPE "
                f"{fit.mape_pct:.0f}%): recorded times include waiting for the slowest rank, so "
                "predictions are rough; tracecli calibrate measures this machine cleanly")
    by_size: dict[int, list[float]] = {}
    for n, ms in points:
        by_size.setdefault(n, []).append(ms)
    measured = monotone((n, trimmed_mean(times)) for n, times in by_size.items())
    if gpus == ranks:
        source += "; the run's own times per size where it measured them"
    else:
        source += (f"; used on {gpus} ranks: the ring formula fitted on {ranks} ranks "
                   "extrapolates, the run's own times do not apply")
    return fitted_model("trace", fit, gpus, source, measured, ranks, algorithm=algorithm, launch_us=launch_us,
                        quality=quality), poor


def resolve_cost(trace: Optional[Trace], request: CostRequest,
                 default_gpus: int = DEFAULT_GPUS) -> tuple[CostModel, list[str]]:
    """The cost model for ``request``: a calibration profile, a preset or overrides when
    given; else fitted to the trace's own all-reduces when it has them; else the default
    preset. Returns it with the notices the user should see."""
    if request.topology is not None or request.nccl_tests is not None:
        return nccl_cost_model(request.topology or TopologyRequest(), request.gpus,
                               request.nccl_tests, request.calibration)
    notices: list[str] = []
    if request.calibration is not None and request.network is not None:
        raise PlanError("pass --calibration or --network, not both")
    profile = read_profile(request.calibration) if request.calibration else None
    gpus = request.gpus
    if gpus is None:
        if profile is not None:
            gpus = profile.gpus
        elif trace is not None and trace.step is not None and trace.step.world_size:
            gpus = trace.step.world_size
        else:
            gpus = default_gpus
    elif profile is not None and profile.gpus != gpus:
        notices.append(f"{request.calibration} was measured on {profile.gpus} ranks; predicting "
                       f"{gpus} ranks from its latency and bandwidth")
    if not request.explicit and trace is not None:
        model, why = trace_cost(trace, gpus, request.algorithm, request.launch_us)
        if model is not None:
            ranks = model.describe()["measured_on_gpus"]
            if ranks != gpus:
                notices.append(f"the trace's all-reduces ran on {ranks} ranks; predicting "
                               f"{gpus} ranks extrapolates the line fitted to them (pass "
                               f"--calibration measured on {gpus} ranks to rely on it)")
            return model, notices + ([why] if why else [])
        if why:
            notices.append(why + f"; using the {DEFAULT_NETWORK} preset (pass --network or "
                           "--calibration)")
    model = resolve_cost_model(gpus, request.network, request.alpha_us, request.bandwidth_gbps,
                               request.calibration, request.algorithm, request.launch_us,
                               profile=profile)
    return model, notices
