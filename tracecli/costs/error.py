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

__all__ = ["ErrorBand", "ErrorTable"]


class ErrorBand(NamedTuple):
    """The signed range ``[low, high]`` of ``(predicted - measured) / measured`` (fractions:
    -0.4 is 40% too fast), and what it rests on (``basis``, a phrase for reports)."""

    low: float
    high: float
    basis: str

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
                "basis": self.basis}


class ErrorTable(NamedTuple):
    """Bands by collective kind (``None``: any kind) and size range ``[lo, hi)`` in bytes
    (``hi`` ``None``: no upper end); the first row that holds a kind and size answers."""

    rows: tuple[tuple[Optional[CollectiveKind], int, Optional[int], ErrorBand], ...]

    def at(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]:
        for row_kind, lo, hi, band in self.rows:
            if (row_kind is None or row_kind == kind) and lo <= nbytes and (hi is None or nbytes < hi):
                return band
        return None
