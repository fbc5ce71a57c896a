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
from .curve import Curve
from .error import ErrorBand, union
from .model import Linear
from .topology import Topology

__all__ = ["Measured", "MEASURED_KIND", "point_basis", "interpolator"]

MEASURED_KIND = CollectiveKind.ALL_REDUCE  # what calibration and traces measure


@dataclass(frozen=True)
class Measured:
    """``line`` with measured all-reduce ``points`` ((bytes, ms), ascending) taken on
    ``points_gpus`` ranks; ``queued_points`` the same sizes started right behind another;
    ``spread`` per measured size ``(bytes, low, high)``: how far its point is from the
    runs it summarises (:func:`~.error.sample_spread`), where it was measured more than once."""

    line: AlphaBeta
    points: tuple[tuple[int, float], ...]
    points_gpus: int
    queued_points: tuple[tuple[int, float], ...] = ()
    spread: tuple[tuple[int, float, float], ...] = ()

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
        return self._at(queued and bool(self.queued_points))(nbytes)

    def __getstate__(self) -> dict:
        """Pickled without the interpolators (made again on first use): ranks send models."""
        return {k: v for k, v in self.__dict__.items() if k != "_interpolators"}

    def _at(self, queued: bool):
        """The function of bytes that answers from the points (or the queued points), made
        once (timelines and the optimal search ask for every bucket)."""
        cache = self.__dict__.get("_interpolators")
        if cache is None:
            cache = {}
            object.__setattr__(self, "_interpolators", cache)  # a cache, not a field
        at = cache.get(queued)
        if at is None:
            latency_ms, ms_per_byte = self.line.linear(MEASURED_KIND)
            at = cache[queued] = interpolator(self.queued_points if queued else self.points,
                                              latency_ms, ms_per_byte)
        return at

    def basis(self, kind: CollectiveKind, nbytes: float) -> Optional[str]:
        """``measured``, ``interpolated``, ``extrapolated``, or ``model`` when the points were
        taken on another rank count; ``None`` for kinds nothing measured."""
        if kind != MEASURED_KIND or not self.points:
            return None
        return point_basis(self.points, nbytes) if self.measured else "model"

    def algorithm_protocol(self, kind: CollectiveKind, nbytes: float) -> Optional[tuple[str, str]]:
        return None

    def error(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]:
        """At a measured size, the spread of its runs around the point; between two, the
        union of theirs (the interpolation assumes nothing moves more in between); beyond
        them, the nearest one's with the line's fit error (the line's slope carries on).
        A size measured once has the spread of the others (``None`` if none was measured
        twice, and for kinds and rank counts nothing measured: the line's)."""
        if kind != MEASURED_KIND or not self.measured:
            return self.line.error(kind, nbytes)
        pts = self.points
        k = bisect.bisect_left(pts, (nbytes, -math.inf))
        if k < len(pts) and pts[k][0] == nbytes:
            return self._band(k)
        if 0 < k < len(pts):
            return union((self._band(k - 1), self._band(k)),
                         "interpolated between two measured sizes: their runs' spread")
        nearest = self._band(0 if k == 0 else len(pts) - 1)
        fit = self.line.error(kind, nbytes)
        return union((nearest, fit) if fit is not None else (nearest,),
                     "extrapolated from the nearest measured size by the line: its runs' "
                     "spread" + (" and the line's fit error" if fit is not None else ""))

    def unknown_error(self, kind: CollectiveKind, nbytes: float) -> str:
        if kind != MEASURED_KIND or not self.measured or not self.spread:
            return self.line.unknown_error(kind, nbytes)
        return "no measured size near it was measured twice"

    def _band(self, k: int) -> Optional[ErrorBand]:
        """The band of measured size ``k``: its own runs', else every measured size's."""
        n = self.points[k][0]
        own = [(lo, hi) for size, lo, hi in self.spread if size == n]
        if own:
            lo, hi = own[0]
            return ErrorBand(lo, hi, f"the spread of the runs measured at {n:,} bytes")
        if not self.spread:
            return self.line.error(MEASURED_KIND, n)
        return ErrorBand(min(lo for _, lo, _ in self.spread), max(hi for _, _, hi in self.spread),
                         "measured once: the spread of the runs at the other measured sizes")

    def curve(self, kind: CollectiveKind) -> Curve:
        """The measured points' curve (and the queued one's, where it was measured apart);
        the line's off the measured kind and rank count."""
        if kind != MEASURED_KIND or not self.measured:
            return self.line.curve(kind)
        alone = self._curve(self.points, False)
        if self.queued_points and self.queued_points != self.points:
            return alone._replace(queued=self._curve(self.queued_points, True))
        return alone

    def _curve(self, pts, queued: bool) -> Curve:
        kind = MEASURED_KIND
        latency, slope = self.line.linear(kind)
        rising = all(t0 <= t1 for (_, t0), (_, t1) in zip(pts, pts[1:]))
        # below the first point the line's slope from it, floored at the latency: a latency
        # above the first measurement makes the curve drop there
        monotone = rising and slope >= 0 and max(latency, 0.0) <= pts[0][1]
        last_n, last_t = pts[-1]
        floor = min(min(t for _, t in pts), max(pts[0][1] - slope * pts[0][0], latency, 0.0))
        return Curve(self._at(queued), monotone,
                     Linear(max(floor, 0.0), 0.0), None,
                     (last_n, Linear(last_t - slope * last_n, slope)) if slope >= 0 else None)

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


def interpolator(points, latency_ms: float, ms_per_byte: float):
    """The time of ``n`` bytes from measured ``points`` ((bytes, ms), ascending): a measured
    size its measurement, log-log between two, the line's slope beyond them (never below the
    latency under the first).

    >>> at = interpolator(((1000, 0.1), (100_000, 1.0)), 0.05, 1e-5)
    >>> at(1000), round(at(10_000), 4), at(200_000), at(500)
    (0.1, 0.3162, 2.0, 0.095)
    """
    sizes = [n for n, _ in points]
    pts = tuple(points)
    logs = [(math.log(n1 / n0), math.log(t0) if t0 > 0 else 0.0,
             math.log(t1 / t0) if t0 > 0 and t1 > 0 else 0.0)
            for (n0, t0), (n1, t1) in zip(pts, pts[1:])]
    last = len(pts)
    bisect_left, log, exp = bisect.bisect_left, math.log, math.exp

    def at(nbytes: float) -> float:
        k = bisect_left(sizes, nbytes)
        if k < last and sizes[k] == nbytes:
            return pts[k][1]
        if k == 0:  # below the smallest: the line's slope from the first point, never below latency
            return max(pts[0][1] - ms_per_byte * (pts[0][0] - nbytes), latency_ms, 0.0)
        if k == last:  # above the largest: the line's slope from the last point
            return pts[-1][1] + ms_per_byte * (nbytes - pts[-1][0])
        (n0, t0), (n1, t1) = pts[k - 1], pts[k]
        if t0 <= 0 or t1 <= 0 or nbytes <= 0:
            return t0 + (t1 - t0) * (nbytes - n0) / (n1 - n0)
        span, log_t0, rise = logs[k - 1]
        return exp(log_t0 + log(nbytes / n0) / span * rise)

    return at
