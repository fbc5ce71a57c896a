"""The calibration profile file (``calibrate --out``, read by ``--calibration``): built,
written and read here, and nowhere else.

``{"format": "tracecli-calibration", "version": 1, "backend", "device", "gpus",
"algorithm", "alpha_us", "bandwidth_gbps", "fit": {"r2", "mape_pct", "poor"}, "points":
[{"bytes", "times_ms", "median_ms", "mean_ms", "queued_times_ms", "queued_median_ms",
"queued_mean_ms", "predicted_ms"}]}``. Older profiles whose points hold ``median_ms`` only
are read too. Every value is checked where it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import CalibrationError
from ..jsonfile import finite_number, read_json
from ..limits import MAX_RANKS
from .fit import fit_ring, monotone

__all__ = ["CALIBRATION_FORMAT", "ProfilePoint", "CalibrationProfile", "read_profile",
           "MAX_ALPHA_US", "MIN_BANDWIDTH_GBPS", "MAX_BANDWIDTH_GBPS"]

CALIBRATION_FORMAT = "tracecli-calibration"
MAX_ALPHA_US = 1e7  # 10 s a step: no interconnect is slower
MIN_BANDWIDTH_GBPS = 1e-6  # 1 kB/s
MAX_BANDWIDTH_GBPS = 1e6
MIN_POINT_MS = 1e-6  # a nanosecond: no collective is faster
MAX_POINT_MS = 1e7
MAX_POINTS = 100_000


@dataclass(frozen=True)
class ProfilePoint:
    """One size measured as a replay runs it (see ``replay.measure``): every run's slowest
    rank alone after idle (``times_ms``) and queued behind another (``queued_times_ms``),
    with their medians and 10%-trimmed means; ``predicted_ms``: the fitted line's."""

    bytes: int
    mean_ms: float
    median_ms: float
    times_ms: tuple[float, ...] = ()
    queued_times_ms: tuple[float, ...] = ()
    queued_median_ms: Optional[float] = None
    queued_mean_ms: Optional[float] = None
    predicted_ms: Optional[float] = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"bytes": self.bytes, "times_ms": list(self.times_ms),
                               "median_ms": self.median_ms, "mean_ms": self.mean_ms,
                               "queued_times_ms": list(self.queued_times_ms),
                               "queued_median_ms": self.queued_median_ms,
                               "queued_mean_ms": self.queued_mean_ms}
        if self.predicted_ms is not None:
            doc["predicted_ms"] = self.predicted_ms
        return doc


@dataclass(frozen=True)
class CalibrationProfile:
    """A measured sweep and the ring line fitted to it."""

    backend: str
    device: str
    gpus: int
    algorithm: str
    alpha_us: float
    bandwidth_gbps: float
    r2: Optional[float]
    mape_pct: Optional[float]
    poor: Optional[bool]
    points: tuple[ProfilePoint, ...]

    @classmethod
    def measured(cls, points: Sequence[ProfilePoint], gpus: int, backend: str,
                 device: str) -> "CalibrationProfile":
        """The profile of ``points`` measured on ``gpus`` ranks, with the ring line fitted."""
        fit = fit_ring([(p.bytes, p.mean_ms) for p in points], gpus,
                       "widen the size range (--max-size) or add iterations (--iters)")
        rows = tuple(replace(p, predicted_ms=fit.latency_ms + fit.ms_per_byte * p.bytes)
                     for p in points)
        return cls(backend, device, gpus, "ring", fit.alpha_us, fit.bandwidth_gbps, fit.r2,
                   fit.mape_pct, fit.poor, rows)

    def curve(self) -> tuple[tuple[int, float], ...]:
        """(bytes, trimmed-mean ms), made non-decreasing."""
        return monotone((p.bytes, p.mean_ms) for p in self.points)

    def queued_curve(self) -> tuple[tuple[int, float], ...]:
        """The same, queued; empty unless every point has it."""
        queued = [(p.bytes, p.queued_mean_ms) for p in self.points if p.queued_mean_ms is not None]
        return monotone(queued) if len(queued) == len(self.points) else ()

    def to_json(self) -> dict[str, Any]:
        fit: dict[str, Any] = {"r2": self.r2, "mape_pct": self.mape_pct}
        if self.poor is not None:
            fit["poor"] = self.poor
        return {"format": CALIBRATION_FORMAT, "version": 1, "backend": self.backend,
                "device": self.device, "gpus": self.gpus, "algorithm": self.algorithm,
                "alpha_us": self.alpha_us, "bandwidth_gbps": self.bandwidth_gbps, "fit": fit,
                "points": [p.to_json() for p in self.points]}


def read_profile(path: str | Path) -> CalibrationProfile:
    """Read and check a calibration profile (see the module's docstring)."""
    path = str(path)
    doc = read_json(path, CalibrationError, "calibration profile")
    if not isinstance(doc, dict) or doc.get("format") != CALIBRATION_FORMAT:
        raise CalibrationError(f"not a calibration profile (expected \"format\": "
                               f"\"{CALIBRATION_FORMAT}\"); make one with tracecli calibrate --out", path=path, line=1)
    values = {}
    for key, low, high in (("alpha_us", 0.0, MAX_ALPHA_US), ("bandwidth_gbps", MIN_BANDWIDTH_GBPS,
                                                          MAX_BANDWIDTH_GBPS)):
        value = doc.get(key)
        if not finite_number(value) or not low <= value <= high:
            raise CalibrationError(f"{key} must be a number from {low:g} to {high:g}, "
                                   f"not {str(value)[:40]}", path=path, line=1)
        values[key] = float(value)
    gpus = doc.get("gpus", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_RANKS:
        raise CalibrationError(f"gpus must be a rank count from 1 to {MAX_RANKS}, not "
                               f"{str(gpus)[:40]}", path=path, line=1)
    algorithm = doc.get("algorithm", "ring")
    if algorithm not in ("ring", "tree"):
        raise CalibrationError(f"algorithm must be ring or tree, not {str(algorithm)[:40]!r}", path=path, line=1)
    fit = doc.get("fit") if isinstance(doc.get("fit"), dict) else {}
    r2, mape, poor = fit.get("r2"), fit.get("mape_pct"), fit.get("poor")
    return CalibrationProfile(str(doc.get("backend", "?"))[:40], str(doc.get("device", "?"))[:80],
                              gpus, algorithm, values["alpha_us"], values["bandwidth_gbps"],
                              float(r2) if finite_number(r2) else None,
                              float(mape) if finite_number(mape) and 0 <= mape <= 1e6 else None,
                              poor if isinstance(poor, bool) else None,
                              _points(path, doc.get("points", [])))


def _points(path: str, raw) -> tuple[ProfilePoint, ...]:
    """A profile's measured sizes, checked, one per size (the last wins), ascending."""
    if not isinstance(raw, list) or len(raw) > MAX_POINTS:
        raise CalibrationError("points must be a list of measured sizes", path=path, line=1)
    found: dict[int, ProfilePoint] = {}
    for k, p in enumerate(raw):
        if not isinstance(p, dict):
            raise CalibrationError(f"point {k} must be an object with bytes and median_ms", path=path, line=1)
        nbytes = p.get("bytes")
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 < nbytes <= 1 << 50:
            raise CalibrationError(f"point {k}: bytes must be a positive integer", path=path, line=1)
        mean = _ms(path, k, p.get("mean_ms", p.get("median_ms")))
        median = _ms(path, k, p["median_ms"]) if "median_ms" in p else mean
        queued = p.get("queued_mean_ms")
        runs = p.get("times_ms", [])
        if not isinstance(runs, list) or len(runs) > MAX_POINTS:
            raise CalibrationError(f"point {k}: times_ms must be a list of ms", path=path, line=1)
        found[nbytes] = ProfilePoint(nbytes, mean, median, tuple(_ms(path, k, t) for t in runs),
                                     queued_mean_ms=None if queued is None else _ms(path, k, queued))
    return tuple(found[n] for n in sorted(found))


def _ms(path: str, k: int, ms: Any) -> float:
    if not finite_number(ms) or not MIN_POINT_MS <= ms <= MAX_POINT_MS:
        raise CalibrationError(f"point {k}: its time must be a number of ms from "
                               f"{MIN_POINT_MS:g} to 1e7", path=path, line=1)
    return float(ms)
