"""One constructor per source of figures: a preset or overrides, a calibration profile, a
fit to measured points (a trace's own collectives, a replay's in-place calibration)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import CostModelError
from .alphabeta import ALGORITHMS, DEFAULT_NETWORK, NETWORKS, AlphaBeta
from .error import sample_spread
from .fit import RingFit
from .measured import Measured
from .model import CostModel
from .profile import CalibrationProfile, read_profile

__all__ = ["preset_model", "profile_model", "fitted_model", "resolve_cost_model", "point_spread"]


def preset_model(gpus: int, network: Optional[str] = None, algorithm: str = "ring",
                 launch_us: float = 0.0) -> AlphaBeta:
    """The line of a network preset (default: :data:`~.alphabeta.DEFAULT_NETWORK`)."""
    name = network or DEFAULT_NETWORK
    if name not in NETWORKS:
        raise CostModelError(f"unknown network {name!r}; use one of " + ", ".join(NETWORKS))
    preset = NETWORKS[name]
    return AlphaBeta(name, preset.alpha_us, preset.bandwidth_gbps, gpus, algorithm, launch_us,
                     preset.source)


def profile_model(profile: CalibrationProfile, path: str | Path) -> Measured:
    """The model of a calibration profile read from ``path``: its measured sizes, the line
    beyond them, on the ranks it was measured on."""
    r2 = f", R²={profile.r2:.4f}" if profile.r2 is not None else ""
    source = f"calibrated {profile.backend} on {profile.gpus} ranks ({profile.device}){r2}"
    points = profile.curve()
    quality = None if profile.mape_pct is None else {
        "r2": profile.r2, "mape_pct": profile.mape_pct, "ranks": profile.gpus, "poor": profile.poor}
    line = AlphaBeta(f"calibration:{Path(str(path)).name}", profile.alpha_us,
                     profile.bandwidth_gbps, profile.gpus, profile.algorithm, 0.0,
                     source + (f"; {len(points)} measured sizes" if points else ""), quality)
    spread = point_spread(points, {p.bytes: p.times_ms for p in profile.points})
    return Measured(line, points, profile.gpus if points else 0, profile.queued_curve(), spread)


def fitted_model(name: str, fit: RingFit, gpus: int, source: str,
                 points: Sequence[tuple[int, float]], measured_on: int,
                 queued: Sequence[tuple[int, float]] = (), algorithm: str = "ring",
                 launch_us: float = 0.0, quality: Optional[dict[str, Any]] = None,
                 spread: Sequence[tuple[int, float, float]] = ()) -> Measured:
    """Measured ``points`` (non-decreasing, on ``measured_on`` ranks) with the ring line
    ``fit`` to them, used on ``gpus`` ranks; ``spread``: how far each point is from the runs
    it summarises (``(bytes, low, high)``, :func:`~.error.sample_spread`)."""
    if quality is None:
        quality = {"r2": fit.r2, "mape_pct": fit.mape_pct, "points": len(points),
                   "ranks": measured_on, "poor": fit.poor}
    line = AlphaBeta(name, fit.alpha_us, fit.bandwidth_gbps, gpus, algorithm, launch_us, source,
                     quality)
    return Measured(line, tuple(points), measured_on, tuple(queued), tuple(spread))


def point_spread(points: Sequence[tuple[int, float]], runs) -> tuple[tuple[int, float, float], ...]:
    """``(bytes, low, high)`` of each of ``points`` whose size has several ``runs``
    (``{bytes: [ms, ...]}``): the error of the point against each run."""
    return tuple((n, *band) for n, value in points
                 if (band := sample_spread(value, runs.get(n, ()))) is not None)


NOT_BOTH = "pass --calibration or --network, not both"


def _check(gpus: int, algorithm: str) -> None:
    if gpus < 1:
        raise CostModelError(f"--gpus must be at least 1, not {gpus}")
    if algorithm not in ALGORITHMS:
        raise CostModelError(f"unknown algorithm {algorithm!r}; use ring or tree")


def resolve_cost_model(
    gpus: int,
    network: Optional[str] = None,
    alpha_us: Optional[float] = None,
    bandwidth_gbps: Optional[float] = None,
    calibration: Optional[str] = None,
    algorithm: str = "ring",
    launch_us: float = 0.0,
    default_network: str = DEFAULT_NETWORK,
    profile: Optional[CalibrationProfile] = None,
) -> CostModel:
    """The flat line of a calibration profile (``profile``: one already read from
    ``calibration``), else of a network preset; overrides of alpha and bandwidth last.
    (Which source a request gets, and which may not be mixed: :mod:`.resolve`.)"""
    _check(gpus, algorithm)
    if calibration is not None:
        if network is not None:
            raise CostModelError(NOT_BOTH)
        measured = profile_model(profile if profile is not None else read_profile(calibration),
                                 calibration)
        line = replace(measured.line, gpus=gpus, launch_us=launch_us or measured.line.launch_us,
                       algorithm=algorithm if algorithm != "ring" else measured.line.algorithm)
        model: Any = replace(measured, line=line)
    else:
        model = preset_model(gpus, network or default_network, algorithm, launch_us)
    if alpha_us is not None:
        if alpha_us < 0:
            raise CostModelError("--alpha-us must not be negative")
        model = _line(model, alpha_us=alpha_us, source=model.source + "; alpha overridden")
    if bandwidth_gbps is not None:
        if bandwidth_gbps <= 0:
            raise CostModelError("--bandwidth-gbps must be positive")
        model = _line(model, bandwidth_gbps=bandwidth_gbps,
                      source=model.source + "; bandwidth overridden")
    return model


def _line(model, **changes):
    """``model`` with its line's figures changed."""
    if isinstance(model, Measured):
        return replace(model, line=replace(model.line, **changes))
    return replace(model, **changes)
