"""One rank: join the process group, calibrate and/or replay, gather results on rank 0.

Runs under the launcher's spawned processes (``spawn_main``) or as a process of a
``torchrun`` world (``run_rank`` directly). Rank 0 returns the gathered payload.
"""

from __future__ import annotations

import datetime
import os
import pickle
import socket
import statistics
import time
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

from ..costs import ProfilePoint, fit_ring, fitted_model, monotone
from ..model import CollectiveKind
from .buckets import BucketBuffer
from .emulator import CpuStep, CudaStep, fill, verify
from .jobs import CalibrationJob, Launch, ReplayJob, Sweep
from .measure import GAP_MS, measure, slowest
from .runs import InPlaceCalibration, RankResult, ReplayRun, Schedule, StepTimes, SweepRun

__all__ = ["spawn_main", "run_rank"]

Progress = Optional[Callable[[str, int, int], None]]


LOOPBACK = "127.0.0.1"


def local_store(rank: int, world: int, port: int, timeout_s: float):
    """``(store, socket)``: the rendezvous store of a local spawn, listening on 127.0.0.1
    only. Rank 0 binds the socket itself and hands it to the store (left to itself, the
    store listens on every interface); the caller keeps the socket open while the store
    lives."""
    timeout = datetime.timedelta(seconds=timeout_s)
    if rank != 0:
        return dist.TCPStore(LOOPBACK, port, world, False, timeout), None
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, port))
    listener.listen(max(128, world))
    store = dist.TCPStore(LOOPBACK, port, world, True, timeout, master_listen_fd=listener.fileno())
    return store, listener


def spawn_main(rank: int, world: int, port: int, backend: str, job, launch: Launch, queue) -> None:
    """Entry point of a spawned rank (through :mod:`.child`): results, progress and errors
    go through ``queue``; every socket it opens is on the loopback interface."""
    os.environ.update({"MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port),
                       "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"})
    code = 0
    try:
        def progress(stage: str, done: int, total: int) -> None:
            queue.put(("progress", stage, done, total))

        store, _listener = local_store(rank, world, port, launch.timeout_s)
        payload = run_rank(rank, world, rank, backend, job, launch, progress if rank == 0 else None,
                           store)
        if rank == 0:
            queue.put(("result", payload))
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, then exit
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        queue.put(("error", rank, f"{type(exc).__name__}: {message}"[:500]))
        code = 1
    finally:
        queue.close()
        queue.join_thread()
    os._exit(code)


def _fault(launch: Launch, rank: int) -> None:
    fault = launch.fault
    if fault is None or fault.rank != rank:
        return
    if fault.mode == "raise":
        raise RuntimeError("planted failure (--inject-fault)")
    if fault.mode == "exit":
        os._exit(3)
    if fault.mode == "hang":
        while True:
            time.sleep(1)


def run_rank(rank: int, world: int, local_rank: int, backend: str, job, launch: Launch,
             progress: Progress = None, store=None) -> Optional[ReplayRun | SweepRun]:
    """One rank's work; ``store``: the rendezvous (None under torchrun: its environment).
    Rank 0 returns the run (:class:`~.runs.ReplayRun` or :class:`~.runs.SweepRun`)."""
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=launch.timeout_s),
                            **({"store": store} if store is not None else {}),
                            **({"device_id": device} if backend == "nccl" else {}))
    try:
        if isinstance(job, CalibrationJob):
            points = _calibrate(job.sweep, rank, world, device, backend, launch, progress)
            return _gather(points, rank, world, lambda parts: SweepRun(
                tuple(parts[0]), _device_name(device), backend, world))
        return _replay(job, rank, world, device, backend, launch, progress)
    finally:
        dist.destroy_process_group()


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({os.cpu_count()} cores)"


def _barrier(backend: str, device: torch.device) -> None:
    dist.barrier(**({"device_ids": [device.index]} if backend == "nccl" else {}))


def _timed_collective(buf: BucketBuffer, backend: str, device) -> float:
    """ms of one blocking run of the bucket's collective started right after a barrier
    (CUDA events on GPU)."""
    run = buf.launch
    _barrier(backend, device)
    if backend == "nccl":
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(stop)
    t = time.perf_counter()
    run()
    return (time.perf_counter() - t) * 1000.0


def _step(buffers, device, backend: str, world: int):
    """The emulator a replay runs its buckets with (and calibration measures them with)."""
    if backend == "nccl":
        return CudaStep(buffers, device)
    return CpuStep(buffers, os.environ.get("LOCAL_WORLD_SIZE", str(world)) == str(world))


def _sweep_buffers(sizes, world: int, device) -> list[BucketBuffer]:
    return [BucketBuffer(size, "float32", CollectiveKind.ALL_REDUCE, world, device) for size in sizes]


def _calibrate(sweep: Sweep, rank: int, world: int, device, backend: str, launch: Launch,
               progress: Progress) -> list[ProfilePoint]:
    """``calibrate``: every sweep size timed in a replay's conditions (see :mod:`.measure`)."""
    buffers = _sweep_buffers(sweep.sizes(), world, device)
    return measure(lambda pool: _step(pool, device, backend, world), buffers, range(len(buffers)),
                   rank, device, sweep.iters, sweep.warmup,
                   before_round=lambda r: _fault(launch, rank) if r == 1 else None,
                   on_round=(lambda done, total: progress("calibrate", done, total)) if progress else None)


def _bare_loop(buffers, job: ReplayJob, device, backend: str) -> list[float]:
    """Median time of a plain blocking all-reduce of each bucket's buffer (slowest rank)."""
    result = []
    for buf in buffers:
        times = []
        for it in range(job.warmup + job.iters):
            elapsed = _timed_collective(buf, backend, device)
            if it >= job.warmup:
                times.append(elapsed)
        result.append(statistics.median(slowest(times, device)))
    return result


def _gather(obj: Any, rank: int, world: int, combine) -> Any:
    """Pickled objects of every rank, combined on rank 0.

    Plain tensor collectives: torch's gather_object needs numpy, which torch does not
    declare as a dependency.
    """
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" \
        else torch.device("cpu")
    data = torch.tensor(list(pickle.dumps(obj)), dtype=torch.uint8, device=device)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64, device=device))
    longest = max(int(s.item()) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: data.numel()] = data
    parts = [torch.zeros(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(parts, padded)
    if rank != 0:
        return None
    return combine([pickle.loads(bytes(p[: int(s.item())].cpu().tolist()))
                    for p, s in zip(parts, sizes)])


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


def _calibrate_in_place(job: ReplayJob, rank: int, world: int, device, backend: str,
                        launch: Launch, progress: Progress):
    """The replay's own cost model: the plan's bucket sizes measured on the replay's own
    buffers, interleaved with a sweep (for the line and for sizes between), in the replay's
    conditions. A sweep alone first gives the plan a provisional model; a plan whose bucket
    sizes change under the measured model (optimal) has the new sizes measured too."""
    report = (lambda done, total: progress("calibrate", done, total)) if progress else None
    sweep = _sweep_buffers(job.sweep.sizes(), world, device)
    make = lambda pool: _step(pool, device, backend, world)  # noqa: E731
    first = measure(make, sweep, range(len(sweep)), rank, device, rounds=2, warmup=1,
                    before_round=lambda r: _fault(launch, rank) if r == 1 else None)
    cost, _ = _model(first, world, backend, "a sweep")
    points: dict[int, ProfilePoint] = {}
    plan = job.plan(cost)
    for _ in range(2):
        buffers = [BucketBuffer(b.nbytes, b.dtype, b.collective, world, device) for b in plan.buckets]
        wanted = [k for k, b in enumerate(buffers)
                  if b.collective is CollectiveKind.ALL_REDUCE and b.nbytes not in points]
        if not wanted and points:
            break
        chosen = {buffers[k].nbytes: buffers[k] for k in wanted}  # one buffer a size
        pool = [chosen[n] for n in sorted(chosen)] + [b for b in sweep if b.nbytes not in points]
        for p in measure(make, pool, range(len(pool)), rank, device, rounds=5, warmup=1,
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


def _replay(job: ReplayJob, rank: int, world: int, device, backend: str, launch: Launch,
            progress: Progress) -> Optional[ReplayRun]:
    calibration = None
    if job.cost is None:
        cost, plan, calibration = _calibrate_in_place(job, rank, world, device, backend, launch,
                                                      progress)
    else:  # every rank computes the same plan from the same inputs: pure functions
        cost = job.cost
        plan = job.plan(cost)
    timeline = plan.timeline
    launch_ms, previous = [], 0.0
    for b in timeline.buckets:
        previous = max(previous, b.ready_ms)
        launch_ms.append(previous)
    schedule = Schedule(tuple(launch_ms), job.inp.backward_end_ms, job.inp.update_ms)
    buffers = [BucketBuffer(b.nbytes, b.dtype, b.collective, world, device) for b in timeline.buckets]
    step = _step(buffers, device, backend, world)
    iterations: list[StepTimes] = []
    verified = True
    total = job.warmup + job.iters
    for it in range(total):
        if it == 1 and job.cost is not None:
            _fault(launch, rank)
        fill(buffers, rank)
        times = step.run(schedule)
        verified = verify(buffers) and verified
        if it >= job.warmup:
            iterations.append(times)
        if progress:
            progress("replay", it + 1, total)
    baseline = _bare_loop(buffers, job, device, backend) if job.baseline else None
    ok = slowest([0.0 if verified else 1.0], device)[0] == 0.0
    return _gather(RankResult(rank, tuple(iterations)), rank, world, lambda parts: ReplayRun(
        tuple(parts), ok, cost, calibration, plan, _device_name(device), backend, world,
        tuple(baseline) if baseline is not None else None, tuple(b.describe() for b in buffers)))
