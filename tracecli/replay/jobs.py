"""What a replay or calibration run is asked to do: plain picklable data, no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..costs import CostModel
from ..planning import Options
from ..planning.base import FixedPlan, PlanInput
from ..planning.plan import BucketPlan, fixed_plan, make_plan

__all__ = ["Fault", "Ranks", "Sweep", "ReplayJob", "CalibrationJob", "BACKENDS", "FAULT_MODES",
           "step_ms", "collective_timeout_s"]

BACKENDS = ("auto", "nccl", "gloo")
FAULT_MODES = ("raise", "exit", "hang")


@dataclass(frozen=True)
class Fault:
    """A planted failure, for testing teardown: rank ``rank`` raises, exits or hangs."""

    rank: int
    mode: str


@dataclass(frozen=True)
class Ranks:
    """Where and how ranks run."""

    gpus: int = 2
    backend: str = "auto"  # resolved to nccl or gloo by the launcher
    timeout_s: float = 30.0  # collective timeout; also bounds teardown
    fault: Optional[Fault] = None


@dataclass(frozen=True)
class Sweep:
    """All-reduce sizes to time: ``points`` log-spaced sizes in ``[min_bytes, max_bytes]``."""

    min_bytes: int = 4096
    max_bytes: int = 256 * 1024 * 1024
    points: int = 12
    warmup: int = 3
    iters: int = 10

    @classmethod
    def covering(cls, total_bytes: int, points: int = 6, warmup: int = 1, iters: int = 5) -> "Sweep":
        """A short sweep from 4 KiB up to everything in one bucket (capped at 1 GiB): the
        range any plan of these gradients can use, so the fit interpolates.

        >>> Sweep.covering(574_668_960).max_bytes
        574668960
        """
        top = max(64 * 1024, min(int(total_bytes), 1 << 30))
        return cls(4096, top, points, warmup, iters)

    def sizes(self) -> list[int]:
        if self.points <= 1 or self.max_bytes <= self.min_bytes:
            return [max(self.min_bytes, 4)]
        ratio = (self.max_bytes / self.min_bytes) ** (1.0 / (self.points - 1))
        sizes = {int(round(self.min_bytes * ratio ** i / 4.0)) * 4 for i in range(self.points)}
        return sorted(s for s in sizes if s > 0)


@dataclass(frozen=True)
class ReplayJob:
    inp: PlanInput
    strategy: str
    options: Options  # the strategy's own record
    cost: Optional[CostModel]  # None: calibrate in place before the replay
    cost_source: str
    iters: int = 20
    warmup: int = 3
    fixed: Optional[FixedPlan] = None
    sweep: Sweep = field(default_factory=lambda: Sweep(points=6, warmup=1, iters=5))
    baseline: bool = False  # also time a bare all-reduce loop over the same buffers
    calibration_budget_s: float = 8.0  # in-place calibration: rounds beyond 5 while this lasts

    def plan(self, cost: CostModel) -> BucketPlan:
        """The plan to replay, predicted under ``cost`` (pure: every rank computes the same)."""
        if self.fixed is None:
            return make_plan(self.inp, self.strategy, self.options, cost)
        return fixed_plan(self.inp, self.fixed.buckets, self.fixed.strategy, self.options, cost,
                          self.fixed.collectives, self.fixed.messages)


@dataclass(frozen=True)
class CalibrationJob:
    sweep: Sweep


CALIBRATION_STEP_MS = 102.0  # a calibration step: 2 ms idle and at most 100 ms of hold (measure)


def step_ms(job) -> float:
    """The longest an emulated step of ``job`` computes: its backward and update (a
    calibration's steps are short)."""
    if isinstance(job, ReplayJob):
        return job.inp.backward_end_ms + job.inp.update_ms
    return CALIBRATION_STEP_MS


def collective_timeout_s(job, timeout_s: float, backend: str) -> float:
    """The process group's timeout for ``job`` under ``--timeout timeout_s``.

    NCCL's watchdog times a collective from its enqueue and aborts the process when it is
    older than the group's timeout (torch 2.13: distributed_c10d.py:1725-1730 "the duration
    after which collectives will be aborted asynchronously and the process will crash";
    include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:396 ``checkTimeout`` against
    :443 ``workStartTime_``, the work's creation: ProcessGroupNCCL.cpp ``checkTimeout`` is
    ``now - workStartTime_ >= opTimeout_``), and a CUDA step enqueues its collectives as it
    starts: the last bucket waits on the GPU for the
    whole backward before it can start. So under NCCL the group's timeout is ``--timeout``
    plus twice the step (a spin clock slower than calibrated stretches the step until the
    spin is rescaled); a collective then times out at most ``--timeout`` after the plan says
    it starts, and the launcher names a hung rank well before (:mod:`.watch`). gloo times a
    collective from when it starts, and the replay starts each when it is due.

    >>> collective_timeout_s(CalibrationJob(Sweep()), 30.0, "gloo")
    30.0
    """
    if backend != "nccl":
        return timeout_s
    return timeout_s + 2.0 * step_ms(job) / 1000.0
