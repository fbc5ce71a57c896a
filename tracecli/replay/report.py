"""Measured against predicted: the replay report (pure; no torch).

Per bucket and per iteration, the slowest rank's times, medians over the timed
iterations (and the bucket's 10%-trimmed mean duration); the iteration's p90; the error of
the prediction. Exposed communication is each iteration less its compute *as it ran* (the
spin clock may drift, a sleep may oversleep: neither is communication), and how far that
compute was from the plan's is reported beside it. :meth:`ReplayReport.to_json` is the ``replay --json`` document (``docs/json.md``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Optional

from ..costs import trimmed_mean
from ..planning.plan import BucketPlan
from .jobs import ReplayJob
from .records import BufferInfo, InPlaceCalibration, ReplayRun

__all__ = ["MeasuredBucket", "MeasuredRun", "ReplayInfo", "ReplayReport", "replay_report",
           "p90"]


def p90(values: list[float]) -> float:
    """The 90th percentile, linearly interpolated.

    >>> p90([1.0, 2.0, 3.0, 4.0])
    3.7
    """
    return values[0] if len(values) == 1 else statistics.quantiles(values, n=10,
                                                                   method="inclusive")[-1]


@dataclass(frozen=True)
class MeasuredBucket:
    index: int
    ready_ms: float  # launched
    start_ms: float
    end_ms: float
    duration_ms: float
    mean_duration_ms: float
    bare_ms: Optional[float] = None  # the same collective in a bare loop (--baseline)

    @property
    def overhead_pct(self) -> Optional[float]:
        if self.bare_ms is None or self.bare_ms <= 0:
            return None
        return 100.0 * (self.duration_ms - self.bare_ms) / self.bare_ms

    def to_json(self, index: bool = True) -> dict[str, Any]:
        doc: dict[str, Any] = {"index": self.index} if index else {}
        doc.update(ready_ms=self.ready_ms, start_ms=self.start_ms, end_ms=self.end_ms,
                   duration_ms=self.duration_ms, mean_duration_ms=self.mean_duration_ms)
        if self.bare_ms is not None:  # the key predates other collectives: the bare collective
            doc.update(bare_allreduce_ms=self.bare_ms, overhead_pct=self.overhead_pct)
        return doc


@dataclass(frozen=True)
class MeasuredRun:
    iteration_ms: float  # median over timed iterations
    iteration_p90_ms: float
    iterations_ms: tuple[float, ...]
    exposed_comm_ms: float  # the iteration less its compute as it ran (medians)
    comm_ms: float
    buckets: tuple[MeasuredBucket, ...]
    compute_ms: Optional[float] = None  # the step's compute as it ran (median, slowest rank)
    compute_drift_pct: Optional[float] = None  # compute_ms against the plan's compute

    def to_json(self) -> dict[str, Any]:
        return {"iteration_ms": self.iteration_ms, "iteration_p90_ms": self.iteration_p90_ms,
                "iterations_ms": list(self.iterations_ms), "exposed_comm_ms": self.exposed_comm_ms,
                "comm_ms": self.comm_ms, "compute_ms": self.compute_ms,
                "compute_drift_pct": self.compute_drift_pct,
                "buckets": [b.to_json() for b in self.buckets]}


@dataclass(frozen=True)
class ReplayInfo:
    backend: str
    device: str
    ranks: int
    iters: int
    warmup: int
    verified: bool
    cost_source: str
    calibration: Optional[InPlaceCalibration]
    buffers: tuple[BufferInfo, ...]
    spin_drift_pct: Optional[float] = None  # GPU: the largest spin-clock drift of any rank

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, "ranks": self.ranks,
                "iters": self.iters, "warmup": self.warmup, "verified": self.verified,
                "cost_source": self.cost_source,
                "calibration": self.calibration.to_json() if self.calibration else None,
                "buffers": [b.to_json() for b in self.buffers],
                "spin_clock_drift_pct": self.spin_drift_pct}


@dataclass(frozen=True)
class ReplayReport:
    """A replayed plan (predicted under the replay's cost model) and what was measured."""

    plan: BucketPlan
    measured: MeasuredRun
    error_pct: Optional[float]
    replay: ReplayInfo

    @property
    def verified(self) -> bool:
        return self.replay.verified

    def to_json(self) -> dict[str, Any]:
        doc = self.plan.to_json()
        doc["measured"] = self.measured.to_json()
        doc["error_pct"] = self.error_pct
        for b, m in zip(doc["buckets"], self.measured.buckets):
            b["measured"] = m.to_json(index=False)
        doc["replay"] = self.replay.to_json()
        return doc


def _computed(times, planned: float) -> float:
    """A step's compute as it ran (the plan's where the step did not measure it)."""
    return planned if times.compute_ms is None else times.compute_ms


def replay_report(job: ReplayJob, run: ReplayRun) -> ReplayReport:
    """The report of ``run``: per iteration and bucket, the slowest rank's times."""
    timeline = run.plan.timeline
    n_iter = len(run.ranks[0].iterations)
    iterations = [max(r.iterations[i].iteration_ms for r in run.ranks) for i in range(n_iter)]

    def slowest(field: str, i: int, k: int) -> float:
        return max(getattr(r.iterations[i], field)[k] for r in run.ranks)

    buckets = []
    for k in range(len(timeline.buckets)):
        launch = [slowest("launch_ms", i, k) for i in range(n_iter)]
        start = [slowest("start_ms", i, k) for i in range(n_iter)]
        end = [slowest("end_ms", i, k) for i in range(n_iter)]
        duration = [e - s for s, e in zip(start, end)]
        buckets.append(MeasuredBucket(k, statistics.median(launch), statistics.median(start),
                                      statistics.median(end), statistics.median(duration),
                                      trimmed_mean(duration),
                                      run.baseline_ms[k] if run.baseline_ms is not None else None))
    median = statistics.median(iterations)
    predicted = timeline.iteration_ms
    computes = [max(_computed(r.iterations[i], timeline.compute_ms) for r in run.ranks)
                for i in range(n_iter)]
    exposed = [max(r.iterations[i].iteration_ms - _computed(r.iterations[i], timeline.compute_ms)
                   for r in run.ranks) for i in range(n_iter)]
    compute = statistics.median(computes)
    measured = MeasuredRun(median, p90(iterations), tuple(iterations),
                           statistics.median(exposed), sum(b.duration_ms for b in buckets),
                           tuple(buckets), compute,
                           100.0 * (compute - timeline.compute_ms) / timeline.compute_ms
                           if timeline.compute_ms > 0 else None)
    drifts = [r.spin_drift_pct for r in run.ranks if r.spin_drift_pct is not None]
    info = ReplayInfo(run.backend, run.device, run.world, job.iters, job.warmup, run.verified,
                      job.cost_source if run.calibration is None else "in-place calibration",
                      run.calibration, run.buffers, max(drifts, key=abs) if drifts else None)
    return ReplayReport(run.plan, measured, 100.0 * (median - predicted) / predicted
                        if predicted else None, info)
