"""Emulated training steps on one rank: compute as timed waits, buckets as real all-reduces.

``CpuStep`` (gloo): compute is an accurate wait that leaves the cores to gloo (sleep, then
a spin of at most 0.1 ms); each bucket is handed to a communication thread when its
gradients are ready, and that thread runs the all-reduces one at a time, in bucket order.
``CudaStep`` (NCCL): compute is a calibrated spin kernel on the compute stream; each
all-reduce is issued right after the kernels before its ready point, so NCCL's stream
waits for them on the GPU exactly as DDP's reducer does; CUDA events time everything.
"""

from __future__ import annotations

import queue
import threading
import time
from functools import partial
from typing import Sequence

import torch

from ..planning.schedule import channel_starts
from .buckets import BucketBuffer
from .records import Schedule, StepTimes

__all__ = ["Schedule", "StepTimes", "CpuStep", "CudaStep", "fill", "verify"]

def fill(buffers: Sequence[BucketBuffer], rank: int) -> None:
    for buf in buffers:
        buf.fill(rank)


def verify(buffers: Sequence[BucketBuffer]) -> bool:
    """Every bucket's collective gave the exact result (see :mod:`.buckets`)."""
    return all(buf.verify() for buf in buffers)


def _now_ms() -> float:
    return time.perf_counter() * 1000.0


def wait_until(deadline_ms: float) -> None:
    """Sleep until ``deadline_ms`` (perf_counter ms), spinning only the last 0.1 ms."""
    while True:
        left = deadline_ms - _now_ms()
        if left <= 0:
            return
        if left > 0.15:
            time.sleep((left - 0.1) / 1000.0)


class CpuStep:
    """gloo on CPU. A communication thread runs the launched all-reduces one after another
    (gloo itself would run queued collectives concurrently), like NCCL's single stream."""

    def __init__(self, buffers: Sequence[BucketBuffer], comm, shared_clock: bool):
        self.buffers = list(buffers)
        self.comm = comm  # a :class:`~.comm.Comm`
        self.shared_clock = shared_clock

    def _start(self) -> float:
        """A common start instant. Ranks on one host share CLOCK_MONOTONIC: rank 0 names an
        instant 5 ms ahead and every rank sleeps until it, aligning them to microseconds;
        across hosts a barrier is the best there is (its exit skew counts as communication).
        """
        if not self.shared_clock:
            self.comm.barrier()
            return _now_ms()
        instant = torch.tensor([_now_ms() + 5.0], dtype=torch.float64)
        self.comm.broadcast(instant, src=0)
        t0 = float(instant.item())
        wait_until(t0)
        return t0

    def run(self, schedule: Schedule) -> StepTimes:
        order = schedule.order()
        n = len(order)
        launched = queue.Queue()
        starts: list = [None] * n
        ends: list = [None] * n
        failure: list = []

        def channel(t0: float) -> None:
            try:
                for _ in range(n):
                    j = launched.get()
                    starts[j] = _now_ms() - t0
                    self.buffers[order[j]].launch(self.comm)
                    ends[j] = _now_ms() - t0
            except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
                failure.append(exc)

        t0 = self._start()
        comm = threading.Thread(target=channel, args=(t0,), daemon=True)
        comm.start()
        launches = []
        for j, at in enumerate(schedule.launch_ms):
            wait_until(t0 + at)
            launches.append(_now_ms() - t0)
            launched.put(j)
        wait_until(t0 + schedule.compute_end_ms)
        comm.join()
        if failure:
            raise failure[0]
        finished = max([schedule.compute_end_ms] + ends)
        wait_until(t0 + finished + schedule.update_ms)
        iteration = _now_ms() - t0
        return StepTimes(iteration, tuple(launches), tuple(starts), tuple(ends))


class CudaStep:
    """NCCL on the current device; requires ``torch.cuda.is_available()``."""

    def __init__(self, buffers: Sequence[BucketBuffer], comm, device: torch.device):
        self.buffers = list(buffers)
        self.comm = comm  # a :class:`~.comm.Comm`
        self.device = device
        self.side = torch.cuda.Stream(device=device)
        self.cycles_per_ms = self._calibrate_spin()

    def _calibrate_spin(self) -> float:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 10_000_000
        torch.cuda._sleep(cycles)  # warm up
        start.record()
        torch.cuda._sleep(cycles)
        stop.record()
        torch.cuda.synchronize(self.device)
        return cycles / max(start.elapsed_time(stop), 1e-6)

    def _spin(self, ms: float) -> None:
        if ms > 0:
            torch.cuda._sleep(int(ms * self.cycles_per_ms))

    def run(self, schedule: Schedule) -> StepTimes:
        event = partial(torch.cuda.Event, enable_timing=True)
        start, compute_end, stop = event(), event(), event()
        order = schedule.order()
        ready = [event() for _ in order]
        ends = [event() for _ in order]
        self.comm.barrier()
        torch.cuda.synchronize(self.device)
        start.record()
        clock = 0.0
        works = []
        for j, at in enumerate(schedule.launch_ms):
            self._spin(at - clock)
            clock = max(clock, at)
            ready[j].record()
            work = self.buffers[order[j]].launch(self.comm, async_op=True)
            with torch.cuda.stream(self.side):
                work.wait()  # the side stream waits for this bucket; compute goes on
                ends[j].record(self.side)
            works.append(work)
        self._spin(schedule.compute_end_ms - clock)
        compute_end.record()
        for work in works:
            work.wait()
        self._spin(schedule.update_ms)
        stop.record()
        torch.cuda.synchronize(self.device)
        launches = tuple(start.elapsed_time(e) for e in ready)
        end_times = tuple(start.elapsed_time(e) for e in ends)
        return StepTimes(start.elapsed_time(stop), launches, channel_starts(launches, end_times), end_times)
