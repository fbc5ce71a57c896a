"""The cost-model protocol: what planning, the timeline and replay ask of any model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Protocol, runtime_checkable

from ..model import CollectiveKind
from .error import ErrorBand

if TYPE_CHECKING:
    from .curve import Curve

__all__ = ["CostModel", "Linear"]


class Linear(NamedTuple):
    """A collective's time as ``latency_ms + ms_per_byte · bytes`` (the optimum's search
    needs this form)."""

    latency_ms: float
    ms_per_byte: float

    def at(self, nbytes: float) -> float:
        return self.latency_ms + self.ms_per_byte * nbytes


@runtime_checkable
class CostModel(Protocol):
    """Time of a collective of a kind and size on ``gpus`` ranks.

    ``time_ms(kind, n, queued)``: ms of one collective of a bucket of ``n`` bytes;
    ``queued``: started the moment the one before it ended (a busy transport), which a
    model that measured it so answers differently. ``linear(kind)``: the straight-line form
    (the exact optimum searches under it). ``basis(kind, n)``: where ``time_ms`` comes from
    when the model holds measurements (``measured``, ``interpolated``, ``extrapolated``,
    ``model``), else ``None``. ``describe()``: the JSON of reports (``cost_model``).
    ``on(gpus)``: the same interconnect figures on another rank count. ``error(kind, n)``: how
    far ``time_ms`` may be from a measurement there (:class:`~.error.ErrorBand`), ``None``
    where nothing bounds it, and ``unknown_error(kind, n)`` then says why, in words.
    ``curve(kind)``: ``time_ms`` of that kind as a function of the
    bytes, with what the optimal search needs to know of its shape (:class:`~.curve.Curve`).
    """

    name: str
    source: str

    @property
    def gpus(self) -> int: ...

    def time_ms(self, kind: CollectiveKind, nbytes: float, queued: bool = False) -> float: ...

    def linear(self, kind: CollectiveKind) -> Linear: ...

    def basis(self, kind: CollectiveKind, nbytes: float) -> Optional[str]: ...

    def algorithm_protocol(self, kind: CollectiveKind, nbytes: float) -> Optional[tuple[str, str]]: ...

    def error(self, kind: CollectiveKind, nbytes: float) -> Optional[ErrorBand]: ...

    def unknown_error(self, kind: CollectiveKind, nbytes: float) -> str: ...

    def curve(self, kind: CollectiveKind) -> "Curve": ...

    def summary(self) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def on(self, gpus: int) -> "CostModel": ...
