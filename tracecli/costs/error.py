"""How far a cost model's time may be from what a run measures: its error band.

Error is ``(predicted - measured) / measured`` everywhere in tracecli: negative where the model
is too fast. A band is the signed range of that error where the model was checked for one kind
of collective over a range of sizes (or, for a fit, its residuals), with the basis of the check
in words; a model answers ``None`` where nothing bounds its error (a preset line nobody measured).

>>> band = ErrorBand(-0.40, 0.10, "leave-one-cluster-out over 9 tables")
>>> band.magnitude, band.text()
(0.4, '-40% to +10%')
>>> [round(t, 3) for t in band.measured_ms(6.0)]   # what a 6 ms prediction may measure
[5.455, 10.0]
>>> table = ErrorTable(((None, 0, 1 << 20, band), (None, 1 << 20, None, ErrorBand(-0.1, 0.1, "x"))))
>>> table.at(CollectiveKind.ALL_REDUCE, 4096) is band, table.at(CollectiveKind.ALL_REDUCE, 1 << 30).text()
(True, '±10%')
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ..model import CollectiveKind

__all__ = ["ErrorBand", "ErrorTable", "sample_spread", "union"]


class ErrorBand(NamedTuple):
    """The signed range ``[low, high]`` of ``(predicted - measured) / measured`` (fractions:
    -0.4 is 40% too fast), and what it rests on (``basis``, a phrase for reports), with the
    same in fields a script can test: ``scope``, the cross-validated errors it comes from
    (the NCCL time model's ``local``, ``network`` or ``fallback``, :mod:`.nccl.accuracy`;
    ``None``: none, a run's spread or a fit's residuals); ``widened_by``, the scopes that
    widened it (``net:CLASS``: the class's own held-out errors, ``fit:CLASS``: the shipped
    constants' misses on the class's own tables); ``capped``, whether its upper edge was cut
    to the line rate, and ``uncapped_high``, that edge before the cut (``None`` where not cut);
    ``extrapolated``, whether the topology is larger than every table the band and the time
    rest on (``NcclModel.beyond_scale``).

    >>> ErrorBand(-0.1, 0.05, "x", "network", ("fit:ib",), True, 0.2).to_json()["widened_by"]
    ['fit:ib']
    """

    low: float
    high: float
    basis: str
    scope: Optional[str] = None
    widened_by: tuple[str, ...] = ()
    capped: bool = False
    uncapped_high: Optional[float] = None
    extrapolated: bool = False  # the topology is larger than every table checking it

    @property
    def magnitude(self) -> float:
        """The largest |error| in the band (a fraction)."""
        return max(-self.low, self.high, 0.0)

    def measured_ms(self, predicted_ms: float) -> tuple[float, float]:
        """The measured times a prediction of ``predicted_ms`` stands for: ``p / (1 + e)``
        over the band (an error of -100% or below bounds nothing above)."""
        fast = predicted_ms / (1.0 + self.high) if self.high > -1.0 else float("inf")
        slow = predicted_ms / (1.0 + self.low) if self.low > -1.0 else float("inf")
        return min(fast, slow), max(fast, slow)

    def text(self) -> str:
        """``-40% to +10%``; one figure when the band is symmetric (``±12%``)."""
        lo, hi = round(100 * self.low), round(100 * self.high)
        return f"±{hi}%" if lo == -hi and hi > 0 else f"{lo:+d}% to {hi:+d}%".replace("+0%", "0%")

    def to_json(self) -> dict:
        return {"low_pct": round(100 * self.low, 3), "high_pct": round(100 * self.high, 3),
                "basis": self.basis, "scope": self.scope, "widened_by": list(self.widened_by),
                "capped": self.capped,
                "uncapped_high_pct": None if self.uncapped_high is None
                else round(100 * self.uncapped_high, 3), "extrapolated": self.extrapolated}


class ErrorTable(NamedTuple):
    """Bands by collective kind (``None``: any kind) and size range ``[lo, hi)`` in bytes
    (``hi`` ``None``: no upper end); the first row that holds a kind and size answers."""

    rows: tuple[tuple[Optional[CollectiveKind], int, Optional[int], ErrorBand], ...]

    def at(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]:
        for row_kind, lo, hi, band in self.rows:
            if (row_kind is None or row_kind == kind) and lo <= nbytes and (hi is None or nbytes < hi):
                return band
        return None


def sample_spread(value: float, samples, cut: float = 0.1) -> Optional[tuple[float, float]]:
    """``(low, high)`` of ``(value - s) / s`` over the ``samples`` of one size that a
    ``cut``-trimmed mean keeps (the value a model answers there is that mean): how far the
    answer is from each run it summarises. ``None`` with fewer than two samples.

    >>> [round(e, 3) for e in sample_spread(2.0, [1.6, 2.0, 2.5])]
    [-0.2, 0.25]
    """
    kept = sorted(s for s in samples if s > 0)
    k = int(len(kept) * cut)
    kept = kept[k:len(kept) - k] or kept
    if len(kept) < 2:
        return None
    errors = [(value - s) / s for s in kept]
    return min(errors), max(errors)


def union(bands, basis: str) -> Optional[ErrorBand]:
    """The band that holds every one of ``bands`` (``None`` entries: unknown, so the union
    is unknown)."""
    bands = list(bands)
    if not bands or any(b is None for b in bands):
        return None
    return ErrorBand(min(b.low for b in bands), max(b.high for b in bands), basis)
