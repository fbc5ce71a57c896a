"""Emulated training steps on one rank: compute as timed waits, buckets as real all-reduces.

``CpuStep`` (gloo): compute is an accurate wait that leaves the cores to gloo (sleep, then
a spin of at most 0.1 ms); each bucket is handed to a communication thread when its
gradients are ready, and that thread runs the all-reduces one at a time, in bucket order.
``CudaStep`` (NCCL): compute is a calibrated spin kernel on the compute stream (split and
rescaled every step: :mod:`.device`); each all-reduce is issued right after the kernels
before its ready point, so NCCL's stream waits for them on the GPU exactly as DDP's reducer
does; CUDA events time everything, from a start every rank's device shares
(:func:`.device.align`).

Both report each step's compute as it ran (``StepTimes.compute_ms``: the backward's end and
the update as measured), so that a slow clock or an overslept wait is not counted as
communication; both tell the launcher each step they begin (``beat``).
"""

from __future__ import annotations

import queue
import threading
import time
from functools import partial
from typing import Callable, Optional, Sequence

import torch

from ..planning.schedule import channel_starts
from .buckets import BucketBuffer
from .device import Spin, align
from .records import Schedule, StepTimes

__all__ = ["Schedule", "StepTimes", "CpuStep", "CudaStep", "fill", "verify", "BARE_LEAD_MS"]

BARE_LEAD_MS = 2.0  # a bare collective starts behind this much spin (measure.GAP_MS)
Beat = Optional[Callable[[], None]]


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

    def __init__(self, buffers: Sequence[BucketBuffer], comm, shared_clock: bool,
                 beat: Beat = None):
        self.buffers = list(buffers)
        self.comm = comm  # a :class:`~.comm.Comm`
        self.shared_clock = shared_clock
        self.beat = beat or (lambda: None)

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

        self.beat()
        t0 = self._start()
        comm = threading.Thread(target=channel, args=(t0,), daemon=True)
        comm.start()
        launches = []
        for j, at in enumerate(schedule.launch_ms):
            wait_until(t0 + at)
            launches.append(_now_ms() - t0)
            launched.put(j)
        wait_until(t0 + schedule.compute_end_ms)
        computed = _now_ms() - t0
        comm.join()
        if failure:
            raise failure[0]
        finished = max([schedule.compute_end_ms] + ends)
        wait_until(t0 + finished + schedule.update_ms)
        iteration = _now_ms() - t0
        return StepTimes(iteration, tuple(launches), tuple(starts), tuple(ends),
                         computed + (iteration - finished if schedule.update_ms > 0 else 0.0))

    def bare(self, index: int) -> float:
        """ms of one blocking run of buffer ``index``'s collective right after a barrier."""
        self.beat()
        self.comm.barrier()
        t = time.perf_counter()
        self.buffers[index].launch(self.comm)
        return (time.perf_counter() - t) * 1000.0

    @staticmethod
    def host_lag_ms(times: StepTimes) -> Optional[float]:
        """The host launches on time (a thread takes each launch): nothing to check."""
        return None


class CudaStep:
    """NCCL on the current device; requires ``torch.cuda.is_available()``."""

    def __init__(self, buffers: Sequence[BucketBuffer], comm, device: torch.device,
                 beat: Beat = None):
        self.buffers = list(buffers)
        self.comm = comm  # a :class:`~.comm.Comm`
        self.device = device
        self.beat = beat or (lambda: None)
        self.side = torch.cuda.Stream(device=device)
        self.spin = Spin(device)
        self.one = torch.empty(1, dtype=torch.float32, device=device)

    def _begin(self) -> None:
        """Start a timed region: the step begun, the device idle, the ranks aligned on it."""
        self.beat()
        torch.cuda.synchronize(self.device)
        align(self.comm, self.spin, self.one)

    def _spin(self, ms: float, then, spun: list) -> None:
        """Spin ``ms``, then record the event ``then``; the spin's own device time is
        bracketed by events (in ``spun``), so a host late to launch it is not clock drift."""
        if ms > 0:
            before = torch.cuda.Event(enable_timing=True)
            before.record()
            spun.append((before, then, self.spin(ms)))
        then.record()

    def run(self, schedule: Schedule) -> StepTimes:
        event = partial(torch.cuda.Event, enable_timing=True)
        start, compute_end, update, stop = event(), event(), event(), event()
        order = schedule.order()
        ready = [event() for _ in order]
        ends = [event() for _ in order]
        spun: list = []
        self._begin()
        start.record()
        clock = 0.0
        works = []
        for j, at in enumerate(schedule.launch_ms):
            self._spin(at - clock, ready[j], spun)
            clock = max(clock, at)
            work = self.buffers[order[j]].launch(self.comm, async_op=True)
            with torch.cuda.stream(self.side):
                work.wait()  # the side stream waits for this bucket; compute goes on
                ends[j].record(self.side)
            works.append(work)
        self._spin(schedule.compute_end_ms - clock, compute_end, spun)
        for work in works:
            work.wait()
        update.record()
        self._spin(schedule.update_ms, stop, spun)
        torch.cuda.synchronize(self.device)
        self.spin.rescale(sum(cycles for _, _, cycles in spun),
                          sum(before.elapsed_time(after) for before, after, _ in spun))
        launches = tuple(start.elapsed_time(e) for e in ready)
        end_times = tuple(start.elapsed_time(e) for e in ends)
        computed = start.elapsed_time(compute_end) + update.elapsed_time(stop)
        return StepTimes(start.elapsed_time(stop), launches, channel_starts(launches, end_times), end_times,
                         computed)

    def bare(self, index: int) -> float:
        """ms of one blocking run of buffer ``index``'s collective alone, launched behind a
        short spin as the replay's buckets are (so the host's launch latency on an idle GPU is
        not in it), from the spin's end to the collective's."""
        ready, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self._begin()
        self._spin(BARE_LEAD_MS, ready, [])
        self.buffers[index].launch(self.comm)
        stop.record()
        torch.cuda.synchronize(self.device)
        return ready.elapsed_time(stop)

    @staticmethod
    def host_lag_ms(times: StepTimes) -> float:
        """For a step that launches everything at one instant: how long after the first
        launch point the compute stream got past the last launch (0 when the host had it all
        enqueued before the device got there; more when the host lagged behind the device)."""
        return times.compute_ms - times.launch_ms[0]
