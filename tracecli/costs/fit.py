"""Least-squares fit of the ring all-reduce line to measured times (pure; no torch).

``t(n) = a + b·n`` with ``a = steps(p)·alpha`` and ``b = traffic(p) / B`` (the all-reduce
row of :mod:`.collectives`: ``2(p-1)`` and ``2(p-1)/p``). The fit weights each
point by ``1/t²`` so small sizes (which fix the latency) count as much as large ones
(which fix the bandwidth); R² and the mean absolute percentage error are reported on the
raw times, and a poor fit is reported, not hidden.

>>> f = fit_ring([(1000, 0.101), (1_000_000, 1.1), (10_000_000, 10.1)], ranks=2)
>>> round(f.alpha_us, 1), round(f.bandwidth_gbps, 3), f.r2 > 0.999
(50.0, 1.0, True)
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from ..errors import CalibrationError
from ..model import CollectiveKind
from .collectives import kind_cost, steps

__all__ = ["RingFit", "fit_ring", "trimmed_mean", "monotone", "POOR_FIT_R2", "POOR_FIT_MAPE"]

POOR_FIT_R2 = 0.95
POOR_FIT_MAPE = 20.0


def trimmed_mean(values: Sequence[float], cut: float = 0.1) -> float:
    """The mean without the ``cut`` share of lowest and of highest values.

    >>> trimmed_mean([1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    5.5
    """
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    kept = ordered[k:len(ordered) - k] or ordered
    return sum(kept) / len(kept)


class RingFit(NamedTuple):
    alpha_us: float
    bandwidth_gbps: float
    r2: float
    mape_pct: float
    latency_ms: float  # a
    ms_per_byte: float  # b
    predicted_ms: tuple[float, ...]

    @property
    def poor(self) -> bool:
        return self.r2 < POOR_FIT_R2 or self.mape_pct > POOR_FIT_MAPE


def fit_ring(points: Sequence[tuple[int, float]], ranks: int, hint: str = "") -> RingFit:
    """Fit ``(bytes, ms)`` points measured on ``ranks`` ranks; ``hint``: what the command
    that measured them can do about a fit that fails (its own options)."""
    if ranks < 2:
        raise CalibrationError("calibration needs at least 2 ranks (--gpus 2)")
    pts = [(float(n), float(t)) for n, t in points if t > 0]
    if len({n for n, _ in pts}) < 2:
        raise CalibrationError("calibration needs timings at 2 or more sizes")
    w = [1.0 / (t * t) for _, t in pts]
    s = sum(w)
    sx = sum(wi * n for wi, (n, _) in zip(w, pts))
    sy = sum(wi * t for wi, (_, t) in zip(w, pts))
    sxx = sum(wi * n * n for wi, (n, _) in zip(w, pts))
    sxy = sum(wi * n * t for wi, (n, t) in zip(w, pts))
    b = (s * sxy - sx * sy) / (s * sxx - sx * sx)
    a = (sy - b * sx) / s
    if a < 0:  # latency cannot be negative: fit the slope through the origin
        a, b = 0.0, sxy / sxx
    if b <= 0:
        raise CalibrationError("all-reduce times do not grow with size" + (f"; {hint}" if hint else
                               ": no bandwidth can be fitted to them"))
    predicted = tuple(a + b * n for n, _ in pts)
    mean = sum(t for _, t in pts) / len(pts)
    ss_tot = sum((t - mean) ** 2 for _, t in pts)
    ss_res = sum((t - p) ** 2 for (_, t), p in zip(pts, predicted))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    mape = 100.0 * sum(abs(t - p) / t for (_, t), p in zip(pts, predicted)) / len(pts)
    kind = CollectiveKind.ALL_REDUCE
    alpha_us = a / steps(kind, ranks, "ring") * 1000.0
    bandwidth = kind_cost(kind).traffic(ranks) / b * 1000.0 / 1e9
    return RingFit(alpha_us, bandwidth, r2, mape, a, b, predicted)


def monotone(points) -> tuple[tuple[int, float], ...]:
    """Measured ``(bytes, ms)`` made non-decreasing in size (pool-adjacent-violators): a
    collective cannot get faster as it grows, so a dip is noise, and neighbouring sizes
    share their evidence instead.

    >>> monotone([(1, 1.0), (2, 3.0), (3, 2.0), (4, 5.0)])
    ((1, 1.0), (2, 2.5), (3, 2.5), (4, 5.0))
    """
    ordered = sorted(points)
    blocks: list[list] = []  # [total, count, first index]
    for i, (_, t) in enumerate(ordered):
        blocks.append([t, 1, i])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count, _ = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    values = []
    for total, count, _ in blocks:
        values += [total / count] * count
    return tuple((n, v) for (n, _), v in zip(ordered, values))
