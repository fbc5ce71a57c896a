"""nccl-tests measurements as a cost source, with NCCL's model between and beyond them.

A size nccl-tests measured (on this many ranks, for this collective) answers with its
measurement. Between two measured sizes the time is NCCL's model times the ratio measured /
model, that ratio interpolated on a log axis of size: the model's shape (its protocol and
algorithm switches) with the measurements' level. Beyond them, the nearest measurement's ratio
carries on. Other collectives, and other rank counts, take the model alone (``basis``:
``model``).

nccl-tests' size column is the buffer for all-reduce, broadcast and reduce-scatter (whose
input is the whole buffer, as a bucket is), and the gathered buffer for all-gather, where a
bucket is one rank's share: the share is the size over the ranks.

>>> from .model import NcclModel
>>> m = NcclModel.for_topology("h100", 1, 8, True, 0, 0, "2.30.7")
>>> k = CollectiveKind.ALL_REDUCE
>>> x = NcclMeasured(m, k, ((1 << 20, 0.05), (1 << 24, 0.2)), 8, "run.txt")
>>> x.time_ms(k, 1 << 20), x.basis(k, 1 << 22), x.basis(k, 1 << 30), x.on(4).basis(k, 1 << 20)
(0.05, 'interpolated', 'extrapolated', 'model')
>>> x.error(k, 1 << 20).text(), x.error(k, 1 << 30) == m.error(k, 1 << 30)
('0% to 0%', True)
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ...model import CollectiveKind
from ..measured import point_basis
from ..curve import Curve
from ..error import ErrorBand
from ..collectives import NAMES
from ..model import Linear
from .model import LINE_FROM, LINE_TO, NcclModel

__all__ = ["NcclMeasured", "KIND_OF_BINARY", "from_nccl_tests"]

KIND_OF_BINARY = {names.binary: kind for kind, names in NAMES.items()}


@dataclass(frozen=True)
class NcclMeasured:
    """``model`` with the ``points`` ((bucket bytes, ms), ascending) nccl-tests measured of
    ``kind`` on ``points_gpus`` ranks, read from ``path``."""

    model: NcclModel
    kind: CollectiveKind
    points: tuple[tuple[int, float], ...]
    points_gpus: int
    path: str
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def source(self) -> str:
        return f"{self.model.source}; measured by nccl-tests in {self.path}"

    @property
    def gpus(self) -> int:
        return self.model.gpus

    @property
    def topology(self):
        return self.model.topology

    @property
    def measured(self) -> bool:
        return bool(self.points) and self.points_gpus == self.gpus

    def _applies(self, kind: CollectiveKind) -> bool:
        return kind == self.kind and self.measured

    def _ratio(self, i: int) -> float:
        n, ms = self.points[i]
        model = self.model.time_ms(self.kind, n)
        return ms / model if model > 0 else 1.0

    def time_ms(self, kind: CollectiveKind, nbytes: float, queued: bool = False) -> float:
        model = self.model.time_ms(kind, nbytes)
        if not self._applies(kind):
            return model
        pts = self.points
        k = bisect.bisect_left(pts, (nbytes, -math.inf))
        if k < len(pts) and pts[k][0] == nbytes:
            return pts[k][1]
        if k == 0 or k == len(pts):
            return model * self._ratio(0 if k == 0 else len(pts) - 1)
        (n0, _), (n1, _) = pts[k - 1], pts[k]
        r0, r1 = self._ratio(k - 1), self._ratio(k)
        if n0 <= 0 or nbytes <= 0 or r0 <= 0 or r1 <= 0:
            return model * r0
        w = math.log(nbytes / n0) / math.log(n1 / n0)
        return model * math.exp(math.log(r0) + w * math.log(r1 / r0))

    def linear(self, kind: CollectiveKind) -> Linear:
        key = ("linear", kind)
        if key not in self._cache:
            t0, t1 = self.time_ms(kind, LINE_FROM), self.time_ms(kind, LINE_TO)
            slope = max((t1 - t0) / (LINE_TO - LINE_FROM), 0.0)
            self._cache[key] = Linear(max(t0 - slope * LINE_FROM, 0.0), slope)
        return self._cache[key]

    def curve(self, kind: CollectiveKind) -> Curve:
        """NCCL's curve scaled by the measured/model ratios (not monotone, as NCCL's own is
        not); its minorant: the model's times the least ratio."""
        if not self._applies(kind):
            return self.model.curve(kind)
        ratios = [self._ratio(i) for i in range(len(self.points))]
        low = min([r for r in ratios if r > 0] or [0.0])
        line = self.model.minorant(kind)
        return Curve(lambda n: self.time_ms(kind, n), False,
                     Linear(line.latency_ms * low, line.ms_per_byte * low))

    def basis(self, kind: CollectiveKind, nbytes: float) -> Optional[str]:
        if kind != self.kind:
            return None
        return point_basis(self.points, nbytes) if self.measured else "model"

    def algorithm_protocol(self, kind: CollectiveKind, nbytes: float) -> Optional[tuple[str, str]]:
        return self.model.algorithm_protocol(kind, nbytes)

    def error(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]:
        """At a measured size, none (the measurement answers: a band of 0); between two, how
        far the measured/model ratio moves across the gap (the interpolation's assumption);
        elsewhere the model's own cross-validated band."""
        basis = self.basis(kind, nbytes)
        if basis == "measured":
            return ErrorBand(0.0, 0.0, f"measured by nccl-tests ({self.path})")
        if basis == "interpolated":
            pts = self.points
            k = bisect.bisect_left(pts, (nbytes, -math.inf))
            r0, r1 = self._ratio(k - 1), self._ratio(k)
            spread = abs(r1 / r0 - 1.0) if r0 > 0 else 0.0
            return ErrorBand(-spread, spread, "interpolated between two sizes nccl-tests "
                             f"measured: their measured/model ratios differ by {100 * spread:.0f}%")
        return self.model.error(kind, nbytes)

    def unknown_error(self, kind: CollectiveKind, nbytes: float) -> str:
        return self.model.unknown_error(kind, nbytes)

    def on(self, gpus: int) -> "NcclMeasured":
        return replace(self, model=self.model.on(gpus), _cache={})

    def topology_doc(self) -> dict[str, Any]:
        return self.model.topology_doc()

    def summary(self) -> str:
        what = (f"{len(self.points)} sizes measured by nccl-tests ({self.path}) answer with their "
                "measurement, NCCL's model shapes the curve between and beyond them"
                if self.measured else f"{self.path} was measured on {self.points_gpus} ranks, "
                f"not {self.gpus}: the model alone answers")
        return f"{self.model.summary()}; {what}"

    def describe(self) -> dict[str, Any]:
        doc = self.model.describe()
        doc.update(source=self.source, measured_sizes=[n for n, _ in self.points],
                   measured_collective=self.kind.value, measured_on_gpus=self.points_gpus,
                   uses_measurements=self.measured, nccl_tests=self.path)
        return doc


def from_nccl_tests(model: NcclModel, run) -> tuple[NcclMeasured, list[str]]:
    """The model with the nccl-tests output ``run`` (:class:`~.nccl_tests.NcclTests`); with
    the notices to give."""
    path = run.path
    binary = (run.binary or "all_reduce_perf")
    kind = next((k for b, k in KIND_OF_BINARY.items() if binary.startswith(b)), None)
    notices = []
    if kind is None:
        from ...errors import CalibrationError

        raise CalibrationError(f"{binary} is not a test tracecli models; pass the "
                               "output of " + ", ".join(KIND_OF_BINARY), path=path)
    ranks = run.ranks or model.gpus
    if run.ranks is None:
        notices.append(f"{path} does not list its ranks ('#  Rank N Group ...' lines); taken as "
                       f"measured on {model.gpus}")
    per = ranks if kind is CollectiveKind.ALL_GATHER else 1
    by: dict[int, float] = {}
    for r in run.rows:
        if r.bytes > 0 and r.bytes % per == 0:
            by[r.bytes // per] = r.time_us / 1000.0
    measured = NcclMeasured(model, kind, tuple(sorted(by.items())), ranks, path)
    if run.gpus_per_thread > 1:  # nccl-tests -g N: launches one after another (timing.launch_us)
        notices.append(f"{path} was run by one thread driving {run.gpus_per_thread} GPUs "
                       f"(nccl-tests -g {run.gpus_per_thread}): its small sizes include launches "
                       "one after another that one process per GPU (DDP, FSDP) does not pay; "
                       "used as measured")
    if ranks != model.gpus:
        notices.append(f"{path} was measured on {ranks} ranks; predicting {model.gpus} from "
                       "NCCL's model alone")
    return measured, notices
