"""Measured all-reduce times, with the alpha-beta line between and beyond them.

A model that carries measured ``points`` (a calibration's, a trace's, on ``points_gpus``
ranks) answers all-reduces on that rank count from them: a measured size is its
measurement, a size between two is interpolated on log-log axes, and only beyond them does
the line extrapolate, from the nearest measurement with the line's slope. Points are made
non-decreasing in size first (a dip is noise: :func:`~.fit.monotone`). Other kinds, and
other rank counts, take the line; the line also stays the summary people read, and the
linear cost the optimum searches under.

>>> line = AlphaBeta("x", 5.0, 10.0, 2)
>>> m = Measured(line, ((1000, 0.1), (100_000, 1.0)), 2)
>>> m.time_ms(CollectiveKind.ALL_REDUCE, 1000), round(m.time_ms(CollectiveKind.ALL_REDUCE, 10_000), 4)
(0.1, 0.3162)
>>> m.basis(CollectiveKind.ALL_REDUCE, 10_000), m.on(4).basis(CollectiveKind.ALL_REDUCE, 10_000)
('interpolated', 'model')
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from typing import Any, Optional

from ..model import CollectiveKind
from .alphabeta import AlphaBeta
from .error import ErrorBand
from .model import Linear
from .topology import Topology

__all__ = ["Measured", "MEASURED_KIND", "point_basis"]

MEASURED_KIND = CollectiveKind.ALL_REDUCE  # what calibration and traces measure


@dataclass(frozen=True)
class Measured:
    """``line`` with measured all-reduce ``points`` ((bytes, ms), ascending) taken on
    ``points_gpus`` ranks; ``queued_points`` the same sizes started right behind another."""

    line: AlphaBeta
    points: tuple[tuple[int, float], ...]
    points_gpus: int
    queued_points: tuple[tuple[int, float], ...] = ()

    @property
    def name(self) -> str:
        return self.line.name

    @property
    def source(self) -> str:
        return self.line.source

    @property
    def gpus(self) -> int:
        return self.line.gpus

    @property
    def topology(self) -> Topology:
        return self.line.topology

    @property
    def measured(self) -> bool:
        """Whether the points were taken on this rank count (else the line answers)."""
        return bool(self.points) and self.points_gpus == self.gpus

    def linear(self, kind: CollectiveKind) -> Linear:
        return self.line.linear(kind)

    def on(self, gpus: int) -> "Measured":
        return replace(self, line=self.line.on(gpus))

    def time_ms(self, kind: CollectiveKind, nbytes: float, queued: bool = False) -> float:
        if kind != MEASURED_KIND or not self.measured:
            return self.line.time_ms(kind, nbytes)
        latency_ms, ms_per_byte = self.line.linear(kind)
        pts = self.queued_points if queued and self.queued_points else self.points
        k = bisect.bisect_left(pts, (nbytes, -math.inf))
        if k < len(pts) and pts[k][0] == nbytes:
            return pts[k][1]
        if k == 0:  # below the smallest: the line's slope from the first point, never below latency
            return max(pts[0][1] - ms_per_byte * (pts[0][0] - nbytes), latency_ms, 0.0)
        if k == len(pts):  # above the largest: the line's slope from the last point
            return pts[-1][1] + ms_per_byte * (nbytes - pts[-1][0])
        (n0, t0), (n1, t1) = pts[k - 1], pts[k]
        if t0 <= 0 or t1 <= 0 or nbytes <= 0:
            return t0 + (t1 - t0) * (nbytes - n0) / (n1 - n0)
        w = math.log(nbytes / n0) / math.log(n1 / n0)
        return math.exp(math.log(t0) + w * math.log(t1 / t0))

    def basis(self, kind: CollectiveKind, nbytes: float) -> Optional[str]:
        """``measured``, ``interpolated``, ``extrapolated``, or ``model`` when the points were
        taken on another rank count; ``None`` for kinds nothing measured."""
        if kind != MEASURED_KIND or not self.points:
            return None
        return point_basis(self.points, nbytes) if self.measured else "model"

    def algorithm_protocol(self, kind: CollectiveKind, nbytes: float) -> Optional[tuple[str, str]]:
        return None

    def error(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]:
        return self.line.error(kind, nbytes)

    def summary(self) -> str:
        return self.line.summary()

    def describe(self) -> dict[str, Any]:
        doc = self.line.describe()
        doc["measured_sizes"] = [n for n, _ in self.points]
        doc["measured_on_gpus"] = self.points_gpus
        doc["uses_measurements"] = self.measured
        return doc


def point_basis(points, nbytes: float) -> str:
    """Where a time at ``nbytes`` comes from, given measured ``points`` (ascending sizes):
    ``measured`` at one of them, ``interpolated`` between, ``extrapolated`` beyond.

    >>> point_basis([(1024, 0.1), (4096, 0.2)], 2048), point_basis([(1024, 0.1)], 1024)
    ('interpolated', 'measured')
    """
    if any(n == nbytes for n, _ in points):
        return "measured"
    return "interpolated" if points[0][0] < nbytes < points[-1][0] else "extrapolated"
