"""The collective cost model (DESIGN 4.2): alpha-beta all-reduce time on p ranks, or the
measured times themselves.

Ring: ``2(p-1)·a + 2(p-1)/p · n/B``; tree (NCCL's double binary tree):
``2·ceil(log2 p)·a + 2(p-1)/p · n/B``. ``B`` is the bus bandwidth as nccl-tests reports it
(busbw = algbw·2(p-1)/p), so one figure serves every p. A per-bucket launch overhead is
added to each collective.

A model that carries measured ``points`` (a calibration's, on the same rank count) answers
from them: a measured size is its measurement, a size between two is interpolated on
log-log axes, and only beyond them does the alpha-beta line extrapolate, from the nearest
measurement with the line's slope. The measured times are first made non-decreasing in size
(a dip is noise). alpha-beta remains the summary people read, and the linear cost the
optimal plan's search uses.

>>> m = CostModel("x", alpha_us=5.0, bandwidth_gbps=10.0, gpus=4)
>>> round(m.time_ms(8_000_000), 4)   # 6 steps x 5 us + 1.5 x 0.8 ms
1.23
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from ..errors import CalibrationError, PlanError
from ..jsonfile import read_json

__all__ = ["monotone", "CostModel", "Network", "NETWORKS", "ALGORITHMS", "resolve_cost_model", "replace_gpus",
           "load_calibration", "calibration_doc", "CALIBRATION_FORMAT"]

ALGORITHMS = ("ring", "tree")
MAX_ALPHA_US = 1e7  # 10 s a step: no interconnect is slower
MIN_BANDWIDTH_GBPS = 1e-6  # 1 kB/s
MAX_BANDWIDTH_GBPS = 1e6
MIN_POINT_MS = 1e-6  # a nanosecond: no collective is faster
CALIBRATION_FORMAT = "tracecli-calibration"


@dataclass(frozen=True)
class Network:
    name: str
    alpha_us: float
    bandwidth_gbps: float  # bus bandwidth, GB/s (10^9 bytes/s)
    source: str


# Bus bandwidths are what nccl-tests' all_reduce_perf reports as busbw at large sizes;
# latencies are per ring step. Figures are typical published values, not guarantees:
# calibrate (tracecli calibrate) on the real machine for predictions you rely on.
NETWORKS: dict[str, Network] = {n.name: n for n in (
    Network("nvlink-h100", 1.0, 370.0, "8x H100 SXM, NVLink 4 / NVSwitch: nccl-tests busbw ~370 GB/s"),
    Network("nvlink-a100", 1.0, 230.0, "8x A100 SXM, NVLink 3 / NVSwitch: nccl-tests busbw ~230 GB/s"),
    Network("pcie4", 2.0, 22.0, "PCIe 4.0 x16 between GPUs (no NVLink): ~22 GB/s busbw of 32 GB/s raw"),
    Network("ib-ndr", 5.0, 45.0, "InfiniBand NDR 400 Gb/s, one NIC per GPU: ~45 GB/s of 50 GB/s"),
    Network("ib-hdr", 5.0, 23.0, "InfiniBand HDR 200 Gb/s, one NIC per GPU: ~23 GB/s of 25 GB/s"),
    Network("100gbe", 15.0, 11.0, "100 Gb Ethernet (RoCE): ~11 GB/s of 12.5 GB/s"),
    Network("25gbe", 25.0, 2.8, "25 Gb Ethernet (TCP): ~2.8 GB/s of 3.1 GB/s"),
    Network("10gbe", 50.0, 1.1, "10 Gb Ethernet (TCP): ~1.1 GB/s of 1.25 GB/s"),
)}


@dataclass(frozen=True)
class CostModel:
    """All-reduce time of ``n`` bytes on ``gpus`` ranks: ``launch + steps·alpha + beta·n``."""

    name: str
    alpha_us: float
    bandwidth_gbps: float
    gpus: int
    algorithm: str = "ring"
    launch_us: float = 0.0
    source: str = ""
    fit: Optional[dict[str, Any]] = None  # quality of a fitted model: r2, mape_pct, points, sizes
    points: tuple[tuple[int, float], ...] = ()  # measured (bytes, ms), ascending, on points_gpus
    points_gpus: int = 0
    queued_points: tuple[tuple[int, float], ...] = ()  # the same, started right behind another

    @property
    def latency_ms(self) -> float:
        """The size-independent part of one collective, in ms."""
        p = self.gpus
        if p <= 1:
            return self.launch_us / 1000.0
        steps = 2 * (p - 1) if self.algorithm == "ring" else 2 * math.ceil(math.log2(p))
        return (self.launch_us + steps * self.alpha_us) / 1000.0

    @property
    def ms_per_byte(self) -> float:
        """The bandwidth term per byte, in ms: ``2(p-1)/p / B``."""
        p = self.gpus
        if p <= 1:
            return 0.0
        return 2.0 * (p - 1) / p / (self.bandwidth_gbps * 1e9) * 1000.0

    @property
    def measured(self) -> bool:
        """Whether times come from measured points (they were taken on this rank count)."""
        return bool(self.points) and self.points_gpus == self.gpus

    def time_ms(self, nbytes: int | float, queued: bool = False) -> float:
        """ms of one all-reduce of ``nbytes``; ``queued``: started the moment the one before
        it ended (a busy transport), where measured so."""
        if not self.measured:
            return self.latency_ms + self.ms_per_byte * nbytes
        pts = self.queued_points if queued and self.queued_points else self.points
        k = bisect.bisect_left(pts, (nbytes, -math.inf))
        if k < len(pts) and pts[k][0] == nbytes:
            return pts[k][1]
        if k == 0:  # below the smallest: the line's slope from the first point, never below latency
            return max(pts[0][1] - self.ms_per_byte * (pts[0][0] - nbytes), self.latency_ms, 0.0)
        if k == len(pts):  # above the largest: the line's slope from the last point
            return pts[-1][1] + self.ms_per_byte * (nbytes - pts[-1][0])
        (n0, t0), (n1, t1) = pts[k - 1], pts[k]
        if t0 <= 0 or t1 <= 0 or nbytes <= 0:
            return t0 + (t1 - t0) * (nbytes - n0) / (n1 - n0)
        w = math.log(nbytes / n0) / math.log(n1 / n0)
        return math.exp(math.log(t0) + w * math.log(t1 / t0))

    def basis(self, nbytes: int | float) -> str:
        """Where ``time_ms(nbytes)`` comes from: measured, interpolated, extrapolated or model."""
        if not self.measured:
            return "model"
        pts = self.points
        if any(n == nbytes for n, _ in pts):
            return "measured"
        return "interpolated" if pts[0][0] < nbytes < pts[-1][0] else "extrapolated"

    def allgather_ms(self, nbytes: int | float) -> float:
        """A ring all-gather of ``nbytes`` from each rank: ``(p-1)·a + (p-1)·n/B`` (B the
        bus bandwidth: nccl-tests' all_gather busbw = algbw·(p-1)/p of ``p·n`` bytes)."""
        p = self.gpus
        if p <= 1:
            return self.launch_us / 1000.0
        return (self.launch_us + (p - 1) * self.alpha_us) / 1000.0 + \
            (p - 1) * nbytes / (self.bandwidth_gbps * 1e9) * 1000.0

    def describe(self) -> dict[str, Any]:
        doc = {"name": self.name, "algorithm": self.algorithm, "gpus": self.gpus,
               "alpha_us": self.alpha_us, "bandwidth_gbps": self.bandwidth_gbps,
               "launch_us": self.launch_us, "source": self.source}
        if self.fit is not None:
            doc["fit"] = dict(self.fit)
        if self.points:
            doc["measured_sizes"] = [n for n, _ in self.points]
            doc["measured_on_gpus"] = self.points_gpus
            doc["uses_measurements"] = self.measured
        return doc


def replace_gpus(model: CostModel, gpus: int) -> CostModel:
    """The same interconnect figures on another number of ranks."""
    return replace(model, gpus=gpus)


def resolve_cost_model(
    gpus: int,
    network: Optional[str] = None,
    alpha_us: Optional[float] = None,
    bandwidth_gbps: Optional[float] = None,
    calibration: Optional[str] = None,
    algorithm: str = "ring",
    launch_us: float = 0.0,
    default_network: str = "nvlink-h100",
    profile: Optional[CostModel] = None,
) -> CostModel:
    """The cost model from a calibration profile (``profile``: one already read), else a
    network preset; overrides last."""
    if gpus < 1:
        raise PlanError(None, None, f"--gpus must be at least 1, not {gpus}")
    if algorithm not in ALGORITHMS:
        raise PlanError(None, None, f"unknown algorithm {algorithm!r}; use ring or tree")
    if calibration is not None:
        if network is not None:
            raise PlanError(None, None, "pass --calibration or --network, not both")
        model = profile if profile is not None else load_calibration(calibration)
        model = replace(model, gpus=gpus, launch_us=launch_us or model.launch_us,
                        algorithm=algorithm if algorithm != "ring" else model.algorithm)
    else:
        name = network or default_network
        if name not in NETWORKS:
            raise PlanError(None, None, f"unknown network {name!r}; use one of "
                            + ", ".join(NETWORKS))
        preset = NETWORKS[name]
        model = CostModel(name, preset.alpha_us, preset.bandwidth_gbps, gpus, algorithm,
                          launch_us, preset.source)
    if alpha_us is not None:
        if alpha_us < 0:
            raise PlanError(None, None, "--alpha-us must not be negative")
        model = replace(model, alpha_us=alpha_us, source=model.source + "; alpha overridden")
    if bandwidth_gbps is not None:
        if bandwidth_gbps <= 0:
            raise PlanError(None, None, "--bandwidth-gbps must be positive")
        model = replace(model, bandwidth_gbps=bandwidth_gbps,
                        source=model.source + "; bandwidth overridden")
    return model


def calibration_doc(backend: str, gpus: int, algorithm: str, alpha_us: float,
                    bandwidth_gbps: float, r2: float, mape_pct: float, points: list[dict],
                    device: str) -> dict[str, Any]:
    """The calibration profile that ``calibrate --out`` writes and ``--calibration`` reads.

    ``points`` are ``{"bytes", "median_ms", "times_ms", "predicted_ms"}`` dicts.
    """
    return {
        "format": CALIBRATION_FORMAT,
        "version": 1,
        "backend": backend,
        "device": device,
        "gpus": gpus,
        "algorithm": algorithm,
        "alpha_us": alpha_us,
        "bandwidth_gbps": bandwidth_gbps,
        "fit": {"r2": r2, "mape_pct": mape_pct},
        "points": points,
    }


def load_calibration(path: str | Path) -> CostModel:
    """Read a calibration profile (see :func:`calibration_doc`)."""
    path = str(path)
    doc = read_json(path, CalibrationError, "calibration profile")
    if not isinstance(doc, dict) or doc.get("format") != CALIBRATION_FORMAT:
        raise CalibrationError(path, 1, f"not a calibration profile (expected \"format\": "
                               f"\"{CALIBRATION_FORMAT}\"); make one with tracecli calibrate --out")
    values = {}
    for key, low, high in (("alpha_us", 0.0, MAX_ALPHA_US), ("bandwidth_gbps", MIN_BANDWIDTH_GBPS,
                                                          MAX_BANDWIDTH_GBPS)):
        value = doc.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not low <= value <= high:
            raise CalibrationError(path, 1, f"{key} must be a number from {low:g} to {high:g}, "
                                   f"not {str(value)[:40]}")
        values[key] = float(value)
    gpus = doc.get("gpus", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 1 << 20:
        raise CalibrationError(path, 1, f"gpus must be a rank count from 1 to {1 << 20}, not "
                               f"{str(gpus)[:40]}")
    algorithm = doc.get("algorithm", "ring")
    if algorithm not in ALGORITHMS:
        raise CalibrationError(path, 1, f"algorithm must be ring or tree, not {str(algorithm)[:40]!r}")
    fit = doc.get("fit") if isinstance(doc.get("fit"), dict) else {}
    r2 = fit.get("r2")
    quality = f", R²={r2:.4f}" if isinstance(r2, (int, float)) and not isinstance(r2, bool) \
        and math.isfinite(r2) else ""
    source = (f"calibrated {str(doc.get('backend', '?'))[:40]} on {gpus} ranks "
              f"({str(doc.get('device', '?'))[:80]}){quality}")
    points = _points(path, doc.get("points", []))
    queued = _points(path, doc.get("points", []), "queued_mean_ms")
    return CostModel(f"calibration:{Path(path).name}", values["alpha_us"],
                     values["bandwidth_gbps"], gpus, algorithm, 0.0,
                     source + (f"; {len(points)} measured sizes" if points else ""),
                     points=points, points_gpus=gpus if points else 0,
                     queued_points=queued if len(queued) == len(points) else ())


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


def _points(path: str, raw, key: str = "mean_ms") -> tuple[tuple[int, float], ...]:
    """A profile's measured sizes: (bytes, ms), from each point's ``key`` (``mean_ms``: the
    trimmed mean; profiles without it: ``median_ms``). Checked, ascending, one per size."""
    if not isinstance(raw, list) or len(raw) > 100_000:
        raise CalibrationError(path, 1, "points must be a list of measured sizes")
    found: dict[int, float] = {}
    for k, p in enumerate(raw):
        if not isinstance(p, dict):
            raise CalibrationError(path, 1, f"point {k} must be an object with bytes and median_ms")
        nbytes = p.get("bytes")
        ms = p.get(key, p.get("median_ms")) if key == "mean_ms" else p.get(key)
        if ms is None and key != "mean_ms":
            continue
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 < nbytes <= 1 << 50:
            raise CalibrationError(path, 1, f"point {k}: bytes must be a positive integer")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) \
                or not MIN_POINT_MS <= ms <= 1e7:
            raise CalibrationError(path, 1, f"point {k}: its time must be a number of ms from "
                                   f"{MIN_POINT_MS:g} to 1e7")
        found[nbytes] = float(ms)
    return monotone(found.items())
