"""A cost model fitted to a trace's own timed gradient all-reduces (a profiled run's).

The run's times per size answer where it measured them (each size's 10%-trimmed mean, made
non-decreasing), the ring line fitted to them between and beyond, and their error is the
spread of the run's own times around each point (:meth:`~.measured.Measured.error`). On
another rank count than the run's the line extrapolates and nothing bounds its error.

>>> runs = TraceTimes(((1 << 20, 2.0), (1 << 20, 2.4), (1 << 24, 20.0), (1 << 24, 22.0)), 2, "gloo", 2)
>>> model, why = trace_fit(runs, 2)
>>> model.time_ms(MEASURED_KIND, 1 << 20), why
(2.2, None)
>>> [round(e, 3) for e in model.error(MEASURED_KIND, 1 << 20)[:2]]   # 2.2 against 2.0 and 2.4
[-0.083, 0.1]
>>> model.on(8).error(MEASURED_KIND, 1 << 20) is None
True
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ..errors import CalibrationError
from .fit import fit_ring, monotone, trimmed_mean
from .measured import MEASURED_KIND, Measured  # noqa: F401 (the doctest's)
from .sources import fitted_model, point_spread

__all__ = ["TraceTimes", "trace_fit"]


class TraceTimes(NamedTuple):
    """What a trace timed of its own gradient all-reduces: ``(bytes, ms)`` of each (every
    step), the rank count they spanned, the backend, and the run's world size."""

    points: tuple[tuple[int, float], ...]
    ranks: Optional[int]
    backend: Optional[str]
    world_size: Optional[int] = None


def trace_fit(times: TraceTimes, gpus: int, algorithm: str = "ring",
              launch_us: float = 0.0) -> tuple[Optional[Measured], Optional[str]]:
    """The model of the run's times used on ``gpus`` ranks, or ``None``; with what the user
    should hear (why there is none, or that the fit is poor)."""
    points, ranks, backend = times.points, times.ranks, times.backend
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
    measured = monotone((n, trimmed_mean(runs)) for n, runs in by_size.items())
    if gpus == ranks:
        source += "; the run's own times per size where it measured them"
    else:
        source += (f"; used on {gpus} ranks: the ring formula fitted on {ranks} ranks "
                   "extrapolates, the run's own times do not apply")
    model = fitted_model("trace", fit, gpus, source, measured, ranks, algorithm=algorithm,
                         launch_us=launch_us, quality=quality,
                         spread=point_spread(measured, by_size))
    return model, poor
