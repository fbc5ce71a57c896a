"""One rank's work, given its collectives: calibrate and/or replay, gather results on rank 0.

:func:`rank_work` runs inside a joined process group (:func:`.worker.run_rank`, with a
:class:`~.comm.TorchComm`) or as one thread of an in-process fake world
(:mod:`.fakecomm`); it calls collectives only through its :class:`~.comm.Comm`.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable, Optional

import torch

from ..costs import MEASURED_KIND, ProfilePoint, fit_ring, fitted_model, monotone
from ..planning.schedule import issue_times
from .buckets import BucketBuffer
from .emulator import Beat, CpuStep, CudaStep, fill, verify
from .jobs import CalibrationJob, Ranks, ReplayJob, Sweep
from .measure import GAP_MS, measure, slowest
from .records import InPlaceCalibration, RankResult, ReplayRun, Schedule, StepTimes, SweepRun

__all__ = ["rank_work", "Progress"]

Progress = Optional[Callable[[str, int, int], None]]


def _fault(ranks: Ranks, rank: int) -> None:
    fault = ranks.fault
    if fault is None or fault.rank != rank:
        return
    if fault.mode == "raise":
        raise RuntimeError("planted failure (--inject-fault)")
    if fault.mode == "exit":
        os._exit(3)
    if fault.mode == "hang":
        while True:
            time.sleep(1)


def rank_work(job, comm, device: torch.device, backend: str, ranks: Ranks,
              progress: Progress = None, beat: Beat = None) -> Optional[ReplayRun | SweepRun]:
    """Calibrate or replay ``job`` on this rank of ``comm`` (a :class:`~.comm.Comm`);
    ``beat()`` is called as each step begins (the launcher's view of progress). Rank 0
    returns the run (:class:`~.records.ReplayRun` or :class:`~.records.SweepRun`), other
    ranks ``None``."""
    world = comm.world
    make = lambda pool: _step(pool, comm, device, backend, beat)  # noqa: E731
    if isinstance(job, CalibrationJob):
        points = _calibrate(job.sweep, comm, device, make, ranks, progress)
        return _gather(points, comm, lambda parts: SweepRun(
            tuple(parts[0]), _device_name(device), backend, world))
    return _replay(job, comm, device, backend, make, ranks, progress, beat)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({os.cpu_count()} cores)"


def _step(buffers, comm, device, backend: str, beat: Beat = None):
    """The emulator a replay runs its buckets with (and calibration measures them with)."""
    if backend == "nccl":
        return CudaStep(buffers, comm, device, beat)
    world = str(comm.world)
    return CpuStep(buffers, comm, os.environ.get("LOCAL_WORLD_SIZE", world) == world, beat)


def _sweep_buffers(sizes, world: int, device) -> list[BucketBuffer]:
    return [BucketBuffer(size, "float32", MEASURED_KIND, world, device) for size in sizes]


def _calibrate(sweep: Sweep, comm, device, make, ranks: Ranks,
               progress: Progress) -> list[ProfilePoint]:
    """``calibrate``: every sweep size timed in a replay's conditions (see :mod:`.measure`)."""
    buffers = _sweep_buffers(sweep.sizes(), comm.world, device)
    return measure(make, buffers, range(len(buffers)), comm, device, sweep.iters, sweep.warmup,
                   before_round=lambda r: _fault(ranks, comm.rank) if r == 1 else None,
                   on_round=(lambda done, total: progress("calibrate", done, total)) if progress else None)


def _bare_loop(step, job: ReplayJob, comm, device) -> list[float]:
    """Median time of a plain blocking run of each bucket's collective (slowest rank)."""
    result = []
    for k in range(len(step.buffers)):
        times = []
        for it in range(job.warmup + job.iters):
            elapsed = step.bare(k)
            if it >= job.warmup:
                times.append(elapsed)
        result.append(statistics.median(slowest(times, comm, device)))
    return result


def _gather(obj: Any, comm, combine) -> Any:
    """Every rank's picklable ``obj``, combined on rank 0 (``None`` on other ranks)."""
    parts = comm.gather_objects(obj)
    return None if parts is None else combine(parts)


def _model(points: list[ProfilePoint], world: int, backend: str, what: str):
    """The cost model of measured points (their times, alpha-beta fitted to them), and the fit."""
    fit = fit_ring([(p.bytes, p.mean_ms) for p in points], world)
    measured = monotone({p.bytes: p.mean_ms for p in points}.items())
    queued = monotone({p.bytes: p.queued_mean_ms for p in points
                       if p.queued_mean_ms is not None}.items())
    model = fitted_model(f"in-place calibration ({backend})", fit, world,
                         f"measured before the replay: {what}; alpha-beta R²={fit.r2:.4f}, "
                         f"MAPE {fit.mape_pct:.1f}%", measured, world, queued)
    return model, fit


def _calibrate_in_place(job: ReplayJob, comm, device, backend: str, make, ranks: Ranks,
                        progress: Progress):
    """The replay's own cost model: the plan's bucket sizes measured on the replay's own
    buffers, interleaved with a sweep (for the line and for sizes between), in the replay's
    conditions. A sweep alone first gives the plan a provisional model; a plan whose bucket
    sizes change under the measured model (optimal) has the new sizes measured too."""
    report = (lambda done, total: progress("calibrate", done, total)) if progress else None
    world = comm.world
    sweep = _sweep_buffers(job.sweep.sizes(), world, device)
    first = measure(make, sweep, range(len(sweep)), comm, device, rounds=2, warmup=1,
                    before_round=lambda r: _fault(ranks, comm.rank) if r == 1 else None)
    cost, _ = _model(first, world, backend, "a sweep")
    points: dict[int, ProfilePoint] = {}
    plan = job.plan(cost)
    for _ in range(2):
        buffers = [BucketBuffer(b.nbytes, b.dtype, b.collective, world, device)
                   for b in plan.buckets if b.collective is MEASURED_KIND]
        wanted = [k for k, b in enumerate(buffers) if b.nbytes not in points]
        if not wanted and points:
            break
        chosen = {buffers[k].nbytes: buffers[k] for k in wanted}  # one buffer a size
        pool = [chosen[n] for n in sorted(chosen)] + [b for b in sweep if b.nbytes not in points]
        for p in measure(make, pool, range(len(pool)), comm, device, rounds=5, warmup=1,
                         budget_s=job.calibration_budget_s, on_round=report):
            points[p.bytes] = p
        cost, _ = _model(list(points.values()), world, backend, "provisional")
        plan = job.plan(cost)  # its bucket sizes may move under the measured model
    cost, fit = _model(list(points.values()), world, backend,
                       f"the plan's bucket sizes and {len(sweep)} sweep sizes")
    plan = job.plan(cost)
    calibration = InPlaceCalibration(
        tuple(sorted(points.values(), key=lambda p: p.bytes)), fit.alpha_us, fit.bandwidth_gbps,
        fit.r2, fit.mape_pct, fit.poor,
        "each size launched from the replay's communication path, alone after "
        f"{GAP_MS:g} ms idle and queued right behind another; sizes interleaved; slowest rank "
        "per run, 10%-trimmed mean per size")
    return cost, plan, calibration


def _replay(job: ReplayJob, comm, device, backend: str, make, ranks: Ranks,
            progress: Progress, beat: Beat = None) -> Optional[ReplayRun]:
    rank, world = comm.rank, comm.world
    calibration = None
    if job.cost is None:
        cost, plan, calibration = _calibrate_in_place(job, comm, device, backend, make, ranks,
                                                      progress)
    else:  # every rank computes the same plan from the same inputs: pure functions
        cost = job.cost
        plan = job.plan(cost)
    timeline = plan.timeline
    if plan.fsdp is not None:  # FSDP: compute waits for its all-gathers; three channels
        from .fsdp import fsdp_step

        step, schedule, buffers = fsdp_step(plan, comm, device, backend, beat)
    else:
        launch_ms = issue_times([b.ready_ms for b in timeline.buckets])
        schedule = Schedule(launch_ms, job.inp.backward_end_ms, job.inp.update_ms)
        buffers = [BucketBuffer(b.nbytes, b.dtype, b.collective, world, device)
                   for b in timeline.buckets]
        step = make(buffers)
    iterations: list[StepTimes] = []
    verified = True
    total = job.warmup + job.iters
    for it in range(total):
        if it == 1 and job.cost is not None:
            _fault(ranks, rank)
        fill(buffers, rank)
        times = step.run(schedule)
        verified = verify(buffers) and verified
        if it >= job.warmup:
            iterations.append(times)
        if progress:
            progress("replay", it + 1, total)
    baseline = _bare_loop(step, job, comm, device) if job.baseline else None
    ok = slowest([0.0 if verified else 1.0], comm, device)[0] == 0.0
    drift = step.spin.drift_pct if isinstance(step, CudaStep) else None
    return _gather(RankResult(rank, tuple(iterations), drift), comm, lambda parts: ReplayRun(
        tuple(parts), ok, calibration, plan, _device_name(device), backend, world,
        tuple(baseline) if baseline is not None else None, tuple(b.describe() for b in buffers)))
