"""One rank: join the process group, calibrate and/or replay, gather results on rank 0.

Runs under the launcher's spawned processes (``spawn_main``) or as a process of a
``torchrun`` world (``run_rank`` directly). Rank 0 returns the gathered payload.
"""

from __future__ import annotations

import datetime
import math
import os
import pickle
import socket
import statistics
import time
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

from ..planning.costmodel import CostModel
from .buckets import BucketBuffer
from .emulator import CpuStep, CudaStep, Schedule, fill, verify
from ..planning.fit import fit_ring
from .jobs import CalibrationJob, Launch, ReplayJob, Sweep

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
             progress: Progress = None, store=None) -> Optional[dict]:
    """One rank's work; ``store``: the rendezvous (None under torchrun: its environment)."""
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
            points = _sweep(job.sweep, rank, world, device, backend, launch, progress)
            return _gather({"points": points}, rank, world, lambda parts: {
                "points": parts[0]["points"], "device": _device_name(device), "backend": backend,
                "world": world})
        return _replay(job, rank, world, device, backend, launch, progress)
    finally:
        dist.destroy_process_group()


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({os.cpu_count()} cores)"


def _barrier(backend: str, device: torch.device) -> None:
    dist.barrier(**({"device_ids": [device.index]} if backend == "nccl" else {}))


def _timed_collective(buf, backend: str, device) -> float:
    """ms of one blocking collective (a tensor: all-reduce; a :class:`BucketBuffer`: its own)
    started right after a barrier (CUDA events on GPU)."""
    run = buf.launch if isinstance(buf, BucketBuffer) else (lambda: dist.all_reduce(buf))
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


def _sweep(sweep: Sweep, rank: int, world: int, device, backend: str, launch: Launch,
           progress: Progress) -> list[dict]:
    """Time all-reduce at each size: the slowest rank's time per run, median over runs."""
    sizes = sweep.sizes()
    results = []
    for i, size in enumerate(sizes):
        buf = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        times = []
        for it in range(sweep.warmup + sweep.iters):
            if it == 1 and i == 0:
                _fault(launch, rank)
            elapsed = _timed_collective(buf, backend, device)
            if it >= sweep.warmup:
                times.append(elapsed)
        slowest = _max_over_ranks(times, device, backend)
        results.append({"bytes": buf.numel() * 4, "times_ms": slowest,
                        "median_ms": statistics.median(slowest)})
        if progress:
            progress("calibrate", i + 1, len(sizes))
    return results


def _bare_loop(buffers, job: ReplayJob, device, backend: str) -> list[float]:
    """Median time of a plain blocking all-reduce of each bucket's buffer (slowest rank)."""
    result = []
    for buf in buffers:
        times = []
        for it in range(job.warmup + job.iters):
            elapsed = _timed_collective(buf, backend, device)
            if it >= job.warmup:
                times.append(elapsed)
        result.append(statistics.median(_max_over_ranks(times, device, backend)))
    return result


def _max_over_ranks(values: list[float], device, backend: str) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.cpu()]


def _gather(obj: Any, rank: int, world: int, combine) -> Optional[dict]:
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


def _replay(job: ReplayJob, rank: int, world: int, device, backend: str, launch: Launch,
            progress: Progress) -> Optional[dict]:
    calibration = None
    cost = job.cost
    if cost is None:  # a short calibration over the range of this plan's bucket sizes
        points = _sweep(job.sweep, rank, world, device, backend, launch, progress)
        fit = fit_ring([(p["bytes"], p["median_ms"]) for p in points], world)
        cost = CostModel(f"in-place calibration ({backend})", fit.alpha_us, fit.bandwidth_gbps,
                         world, "ring", 0.0,
                         f"measured before the replay: {len(points)} sizes, R²={fit.r2:.4f}, "
                         f"MAPE {fit.mape_pct:.1f}%")
        calibration = {"points": points, "alpha_us": fit.alpha_us,
                       "bandwidth_gbps": fit.bandwidth_gbps, "r2": fit.r2, "mape_pct": fit.mape_pct,
                       "poor": fit.poor}
    # every rank computes the same plan from the same inputs: pure, deterministic functions
    plan = job.plan(cost)
    timeline = plan.timeline
    launch_ms, previous = [], 0.0
    for b in timeline.buckets:
        previous = max(previous, b.ready_ms)
        launch_ms.append(previous)
    schedule = Schedule(tuple(launch_ms), job.inp.backward_end_ms, job.inp.update_ms)
    buffers = [BucketBuffer(b.nbytes, b.dtype, b.collective, world, device) for b in timeline.buckets]
    same_host = os.environ.get("LOCAL_WORLD_SIZE", str(world)) == str(world)
    step = CudaStep(buffers, device) if backend == "nccl" else CpuStep(buffers, same_host)
    iterations, verified = [], True
    total = job.warmup + job.iters
    for it in range(total):
        if it == 1:
            _fault(launch, rank)
        fill(buffers, rank)
        times = step.run(schedule)
        verified = verify(buffers) and verified
        if it >= job.warmup:
            iterations.append(times._asdict())
        if progress:
            progress("replay", it + 1, total)
    baseline = _bare_loop(buffers, job, device, backend) if job.baseline else None
    ok = _max_over_ranks([0.0 if verified else 1.0], device, backend)[0] == 0.0
    return _gather({"rank": rank, "iterations": iterations}, rank, world, lambda parts: {
        "ranks": parts, "verified": ok, "cost": cost, "calibration": calibration,
        "plan": plan, "timeline": timeline, "device": _device_name(device), "backend": backend,
        "world": world, "baseline_ms": baseline,
        "buffers": [b.describe() for b in buffers],
    })
