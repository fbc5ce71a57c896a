"""What ranks hand back: typed, picklable, torch-free records of one replay or sweep.

Each rank returns a :class:`RankResult`; rank 0 combines them with what every rank agreed
on into a :class:`ReplayRun` (or a :class:`SweepRun` for ``calibrate``), from which
:mod:`.report` builds the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from ..costs import ProfilePoint
from ..model import CollectiveKind
from ..planning.plan import BucketPlan

__all__ = ["Schedule", "StepTimes", "RankResult", "BufferInfo", "InPlaceCalibration",
           "ReplayRun", "SweepRun"]


class Schedule(NamedTuple):
    """When to launch each bucket (ms from step start, non-decreasing) and compute end;
    ``buckets``: which buffers, in launch order (default: all, in order)."""

    launch_ms: tuple[float, ...]
    compute_end_ms: float
    update_ms: float
    buckets: tuple[int, ...] = ()

    def order(self) -> tuple[int, ...]:
        return self.buckets or tuple(range(len(self.launch_ms)))


class StepTimes(NamedTuple):
    """One emulated step on one rank, ms from its start; ``compute_ms``: the step's compute
    as it ran (backward's end and the update), ``None`` where not measured."""

    iteration_ms: float
    launch_ms: tuple[float, ...]
    start_ms: tuple[float, ...]
    end_ms: tuple[float, ...]
    compute_ms: Optional[float] = None


@dataclass(frozen=True)
class RankResult:
    rank: int
    iterations: tuple[StepTimes, ...]  # the timed ones, in order
    spin_drift_pct: Optional[float] = None  # GPU: the spin clock's drift from its calibration


@dataclass(frozen=True)
class BufferInfo:
    """One bucket's buffer as replay allocated it."""

    dtype: str
    elements: int
    collective: CollectiveKind

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "elements": self.elements, "collective": self.collective.value}


@dataclass(frozen=True)
class InPlaceCalibration:
    """The replay's own cost model: sizes measured in its conditions, the line fitted."""

    points: tuple[ProfilePoint, ...]
    alpha_us: float
    bandwidth_gbps: float
    r2: float
    mape_pct: float
    poor: bool
    conditions: str

    def to_json(self) -> dict[str, Any]:
        return {"points": [p.to_json() for p in self.points], "alpha_us": self.alpha_us,
                "bandwidth_gbps": self.bandwidth_gbps, "r2": self.r2, "mape_pct": self.mape_pct,
                "poor": self.poor, "conditions": self.conditions}


@dataclass(frozen=True)
class ReplayRun:
    """Every rank's results, with the plan they replayed and what they agreed on."""

    ranks: tuple[RankResult, ...]
    verified: bool  # every rank's every collective gave the exact result
    calibration: Optional[InPlaceCalibration]  # None: the job's own cost model
    plan: BucketPlan
    device: str
    backend: str
    world: int
    baseline_ms: Optional[tuple[float, ...]]  # a bare loop of each bucket's collective
    buffers: tuple[BufferInfo, ...]


@dataclass(frozen=True)
class SweepRun:
    """A calibration sweep: every size measured (see :mod:`.measure`)."""

    points: tuple[ProfilePoint, ...]
    device: str
    backend: str
    world: int
