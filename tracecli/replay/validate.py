"""Checks before any rank starts: a replay or a sweep must fit this machine and finish.

A plan file may say anything; nothing it says may make ranks allocate more memory than
the machine has or sleep for a day. These checks need no torch, so they run in the
launcher before a single rank is spawned, and name the file at fault; except GPU memory,
which each NCCL rank checks on its own device before it joins the group (the launcher
would have to make a CUDA context on every GPU to ask).
"""

from __future__ import annotations

import os
from typing import Optional

from ..errors import ReplayUnavailableError
from ..planning.fsdp.replay import SYSTEMS, replay_bytes as fsdp_bytes
from ..units import format_size
from .jobs import ReplayJob, Sweep

__all__ = ["available_memory", "check_job", "check_sweep", "check_gpu_memory", "replay_bytes",
           "sweep_bytes", "MAX_STEP_MS", "RANK_OVERHEAD_BYTES", "GPU_HEADROOM_BYTES"]

MAX_STEP_MS = 600_000.0  # one emulated step of at most 10 minutes
RANK_OVERHEAD_BYTES = 512 << 20  # a CPU rank's interpreter, torch and gloo
GPU_HEADROOM_BYTES = 512 << 20  # a GPU rank's NCCL buffers and allocator rounding (judgement)


def available_memory() -> Optional[int]:
    """Bytes of memory available for new processes (Linux ``MemAvailable``), if known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(per_rank: int, world: int, backend: str, what: str, where: Optional[str]) -> None:
    if backend != "gloo":
        return  # device memory: each rank checks its own GPU (check_gpu_memory)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    need = local * (per_rank + RANK_OVERHEAD_BYTES)
    have = available_memory()
    if have is not None and need > have:
        raise ReplayUnavailableError(f"{what} needs {format_size(per_rank)} of "
                                     f"buffers per rank; {local} ranks need about "
                                     f"{format_size(need)} and this machine has "
                                     f"{format_size(have)} available; use fewer ranks or a "
                                     "smaller plan", path=where)


def replay_bytes(job: ReplayJob, world: int) -> int:
    """Bytes of buffers one rank holds at most to replay ``job``: every bucket (an
    all-gathered gradient also holds every rank's share) and, to calibrate in place, every
    sweep size at once (sizes are measured interleaved; the plan-sized buffers measured with
    them are at most the buckets again, and the replay's buckets reuse what they free)."""
    inp = job.inp
    if inp.fsdp is not None and job.strategy in SYSTEMS:
        return fsdp_bytes(inp, job.options, world) + (
            sum(job.sweep.sizes()) if job.cost is None else 0)
    buffers = sum(g.nbytes for g in inp.grads)
    if not getattr(job.options, "sparse_as_dense", False):
        buffers += world * sum(g.nbytes for g in inp.grads if g.sparse)
    return buffers + (sum(job.sweep.sizes()) if job.cost is None else 0)


def sweep_bytes(sweep: Sweep) -> int:
    """Calibration holds a buffer of every sweep size at once (they are interleaved)."""
    return sum(sweep.sizes())


def check_job(job: ReplayJob, world: int, backend: str, where: Optional[str] = None) -> None:
    """The replay of ``job`` fits in memory and each emulated step ends in reasonable time."""
    inp = job.inp
    step = inp.backward_end_ms + inp.update_ms
    if step > MAX_STEP_MS:
        raise ReplayUnavailableError(f"the step to emulate takes {step / 1000:,.0f} s "
                                     f"(forward, backward and update); replay emulates steps of "
                                     f"at most {MAX_STEP_MS / 1000:,.0f} s", path=where)
    _check_memory(replay_bytes(job, world), world, backend, "this replay", where)


def check_sweep(sweep: Sweep, world: int, backend: str) -> None:
    """Calibration holds a buffer of every sweep size at once (they are interleaved)."""
    _check_memory(sweep_bytes(sweep), world, backend, "this calibration", None)


def check_gpu_memory(job, world: int, rank: int, index: int, free: int, total: int) -> None:
    """The buffers of ``job`` and NCCL's own fit in the ``free`` bytes of GPU ``index``
    (``torch.cuda.mem_get_info`` after ``set_device``: the CUDA context is already made).

    NCCL's own memory is a judgement: :data:`GPU_HEADROOM_BYTES` (its buffers are
    ``NCCL_BUFFSIZE``, 4 MiB by default, per channel, peer and protocol, a few hundred MiB
    on 8 GPUs), and the caching allocator rounds each buffer up to its block size."""
    what = "this replay" if isinstance(job, ReplayJob) else "this calibration"
    buffers = replay_bytes(job, world) if isinstance(job, ReplayJob) else sweep_bytes(job.sweep)
    need = buffers + GPU_HEADROOM_BYTES
    if need > free:
        raise ReplayUnavailableError(
            f"{what} needs {format_size(need)} of GPU memory on cuda:{index} (rank {rank}): "
            f"{format_size(buffers)} of buffers and {format_size(GPU_HEADROOM_BYTES)} for NCCL; "
            f"{format_size(free)} free of {format_size(total)}; free the GPU or replay a "
            "smaller plan")
