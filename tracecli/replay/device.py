"""What a rank does on its GPU besides the collectives: the spin kernel that stands for
compute, and the device-side alignment every timed region starts from.

The spin is ``torch.cuda._sleep(cycles)`` (torch/cuda/__init__.py:238 calls
``torch._C._cuda_sleep``; ``at::cuda::sleep``, ATen/cuda/Sleep.h:9, launches
``spin_kernel<<<1, 1>>>`` on the current stream, one thread looping until ``clock64()``
has advanced ``cycles``). It counts SM cycles, so its duration follows the SM clock, which
changes under load, power and temperature. So :class:`Spin` is calibrated once, then
rescaled after every step from the device time its kernels actually took (each spin is
bracketed by events, so host launch gaps before a spin are not counted as spin time); and
a long spin is split into kernels of at most :data:`MAX_KERNEL_MS` (a GPU that drives a
display kills kernels that run longer than ~2 s).

A timed region starts with :func:`align`: a host barrier does not align the devices (the
ranks leave it tens of microseconds apart, and each device starts its work when its host
enqueues it), so the region starts on the device, right after a 1-element all-reduce that
completes on every rank at the same instant, waited on by the compute stream (``wait()``
makes the current stream wait: include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:352
"same as calling synchronize()", :363 "let current stream wait on the completion"). Before that
collective the compute stream spins :data:`LEAD_MS`, so the host has enqueued the start of
the region before the device gets there (no host launch latency inside the region).
"""

from __future__ import annotations

import math
from typing import Optional

import torch

__all__ = ["Spin", "align", "MAX_KERNEL_MS", "LEAD_MS", "MIN_RESCALE_MS"]

MAX_KERNEL_MS = 50.0  # one spin kernel at most this long
LEAD_MS = 1.0  # spin before the aligning collective: the host gets ahead of the device
MIN_RESCALE_MS = 1.0  # rescale the spin only from at least this much measured spin
CALIBRATION_CYCLES = 10_000_000


class Spin:
    """Compute emulated as spin kernels on the current stream of ``device``."""

    def __init__(self, device: torch.device):
        self.device = device
        self.calibrated = self.cycles_per_ms = self._calibrate()

    def _calibrate(self) -> float:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(CALIBRATION_CYCLES)  # warm up
        start.record()
        torch.cuda._sleep(CALIBRATION_CYCLES)
        stop.record()
        torch.cuda.synchronize(self.device)
        return CALIBRATION_CYCLES / max(start.elapsed_time(stop), 1e-6)

    def __call__(self, ms: float) -> int:
        """Enqueue ``ms`` of spin as kernels of at most :data:`MAX_KERNEL_MS`; the cycles."""
        if ms <= 0:
            return 0
        cycles = int(ms * self.cycles_per_ms)
        kernels = max(1, math.ceil(ms / MAX_KERNEL_MS))
        for k in range(kernels):
            torch.cuda._sleep(cycles // kernels + (1 if k < cycles % kernels else 0))
        return cycles

    def rescale(self, cycles: int, measured_ms: float) -> None:
        """The clock as ``cycles`` of spin measured ``measured_ms`` of device time."""
        if measured_ms >= MIN_RESCALE_MS and cycles > 0:
            self.cycles_per_ms = cycles / measured_ms

    @property
    def drift_pct(self) -> float:
        """How far the SM clock is from its calibration (negative: slower)."""
        return 100.0 * (self.cycles_per_ms / self.calibrated - 1.0)


def align(comm, spin: Spin, one: Optional[torch.Tensor] = None) -> None:
    """Make the compute stream continue at the same instant on every rank of ``comm``: a
    1-element all-reduce, waited on by the compute stream (``Work.wait()`` blocks the current
    stream, not the host, unless TORCH_NCCL_BLOCKING_WAIT: :mod:`.rankenv`), behind a
    :data:`LEAD_MS` spin."""
    if one is None:
        one = torch.empty(1, dtype=torch.float32, device=spin.device)
    one.fill_(1.0)
    spin(LEAD_MS)
    comm.all_reduce(one, async_op=True).wait()
