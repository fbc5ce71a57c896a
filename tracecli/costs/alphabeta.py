"""The alpha-beta line (DESIGN 4.2) and the interconnect presets that parameterise it.

A collective of a bucket of ``n`` bytes on ``p`` ranks costs
``launch + steps(p)·a + traffic(p)·n/B`` (the per-kind terms: :mod:`.collectives`): for a
ring all-reduce ``2(p-1)·a + 2(p-1)/p · n/B``, for a tree ``2·ceil(log2 p)·a + ...``.
``B`` is the bus bandwidth as nccl-tests reports it, so one figure serves every ``p``.

>>> m = AlphaBeta("x", alpha_us=5.0, bandwidth_gbps=10.0, gpus=4)
>>> round(m.time_ms(CollectiveKind.ALL_REDUCE, 8_000_000), 4)   # 6 steps x 5 us + 1.5 x 0.8 ms
1.23
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from ..model import CollectiveKind
from .collectives import kind_cost, steps
from .curve import Curve, line_curve
from .error import ErrorBand
from .model import Linear
from .topology import Topology

__all__ = ["AlphaBeta", "Network", "NETWORKS", "ALGORITHMS", "DEFAULT_NETWORK"]

ALGORITHMS = ("ring", "tree")
DEFAULT_NETWORK = "nvlink-h100"


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
class AlphaBeta:
    """One latency and one bus bandwidth for every link: a flat topology of ``gpus`` ranks.

    ``fit``: the quality of a line fitted to measurements (r2, mape_pct, ...), reported.
    """

    name: str
    alpha_us: float
    bandwidth_gbps: float
    gpus: int
    algorithm: str = "ring"
    launch_us: float = 0.0
    source: str = ""
    fit: Optional[dict[str, Any]] = None

    @property
    def topology(self) -> Topology:
        return Topology.flat(self.gpus)

    def linear(self, kind: CollectiveKind) -> Linear:
        """``(latency_ms, ms_per_byte)`` of ``kind`` on these ranks (worked out once a kind:
        timelines ask for every bucket)."""
        lines = self.__dict__.get("_lines")
        if lines is None:
            lines = {}
            object.__setattr__(self, "_lines", lines)  # a cache, not a field: frozen stays true
        line = lines.get(kind)
        if line is None:
            line = lines[kind] = self._linear(kind)
        return line

    def _linear(self, kind: CollectiveKind) -> Linear:
        p = self.gpus
        if p <= 1:
            return Linear(self.launch_us / 1000.0, 0.0)
        row = kind_cost(kind)
        latency = (self.launch_us + steps(kind, p, self.algorithm) * self.alpha_us) / 1000.0
        return Linear(latency, row.traffic(p) / (self.bandwidth_gbps * 1e9) * 1000.0)

    def time_ms(self, kind: CollectiveKind, nbytes: float, queued: bool = False) -> float:
        latency_ms, ms_per_byte = self.linear(kind)
        return latency_ms + ms_per_byte * nbytes

    def basis(self, kind: CollectiveKind, nbytes: float) -> Optional[str]:
        return None

    def algorithm_protocol(self, kind: CollectiveKind, nbytes: float) -> Optional[tuple[str, str]]:
        return None

    def error(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]:
        """A fitted line on the ranks it was fitted on: its mean absolute percentage error,
        both ways. ``None`` for a preset (typical published figures, never checked on the
        user's machine) and for a fit used on another rank count (nothing measured there)."""
        fit = self.fit or {}
        mape = fit.get("mape_pct")
        if mape is None or fit.get("ranks", self.gpus) != self.gpus:
            return None
        return ErrorBand(-mape / 100.0, mape / 100.0,
                         f"the line's mean |error| over the {fit.get('points', 'measured')} "
                         "times it was fitted to")

    def unknown_error(self, kind: CollectiveKind, nbytes: float) -> str:
        fit = self.fit or {}
        if not fit:
            return (f"the {self.name} preset: typical published figures, never measured on "
                    "this machine")
        if fit.get("ranks", self.gpus) != self.gpus:
            return f"fitted on {fit['ranks']} ranks, predicting {self.gpus}: nothing was measured there"
        return "the fit reports no error"

    def curve(self, kind: CollectiveKind) -> Curve:
        """The line of ``kind``: the same queued or not."""
        return line_curve(self.linear(kind))

    def summary(self) -> str:
        """``name algorithm, alpha .. us, bus bandwidth .. GB/s — source``: one flat line."""
        return (f"{self.name} {self.algorithm}, alpha {self.alpha_us:g} us, bus bandwidth "
                f"{self.bandwidth_gbps:g} GB/s"
                + (f", launch {self.launch_us:g} us" if self.launch_us else "")
                + f" — {self.source}")

    def on(self, gpus: int) -> "AlphaBeta":
        return replace(self, gpus=gpus)

    def describe(self) -> dict[str, Any]:
        doc = {"name": self.name, "algorithm": self.algorithm, "gpus": self.gpus,
               "alpha_us": self.alpha_us, "bandwidth_gbps": self.bandwidth_gbps,
               "launch_us": self.launch_us, "source": self.source}
        if self.fit is not None:
            doc["fit"] = dict(self.fit)
        return doc
