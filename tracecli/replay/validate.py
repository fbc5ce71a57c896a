"""Checks before any rank starts: a replay or a sweep must fit this machine and finish.

A plan file may say anything; nothing it says may make ranks allocate more memory than
the machine has or sleep for a day. These checks need no torch, so they run in the
launcher before a single rank is spawned, and name the file at fault.
"""

from __future__ import annotations

import os
from typing import Optional

from ..errors import ReplayUnavailableError
from ..units import format_size
from .jobs import ReplayJob, Sweep

__all__ = ["available_memory", "check_job", "check_sweep", "MAX_STEP_MS", "RANK_OVERHEAD_BYTES"]

MAX_STEP_MS = 600_000.0  # one emulated step of at most 10 minutes
RANK_OVERHEAD_BYTES = 512 << 20  # a CPU rank's interpreter, torch and gloo


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
        return  # device memory: each rank holds its own GPU; checked by torch in the rank
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    need = local * (per_rank + RANK_OVERHEAD_BYTES)
    have = available_memory()
    if have is not None and need > have:
        raise ReplayUnavailableError(f"{what} needs {format_size(per_rank)} of "
                                     f"buffers per rank; {local} ranks need about "
                                     f"{format_size(need)} and this machine has "
                                     f"{format_size(have)} available; use fewer ranks or a "
                                     "smaller plan", path=where)


def check_job(job: ReplayJob, world: int, backend: str, where: Optional[str] = None) -> None:
    """The replay of ``job`` fits in memory and each emulated step ends in reasonable time."""
    inp = job.inp
    step = inp.backward_end_ms + inp.update_ms
    if step > MAX_STEP_MS:
        raise ReplayUnavailableError(f"the step to emulate takes {step / 1000:,.0f} s "
                                     f"(forward, backward and update); replay emulates steps of "
                                     f"at most {MAX_STEP_MS / 1000:,.0f} s", path=where)
    buffers = sum(g.nbytes for g in inp.grads)
    if not getattr(job.options, "sparse_as_dense", False):  # an all-gathered gradient also holds every rank's share
        buffers += world * sum(g.nbytes for g in inp.grads if g.sparse)
    # in-place calibration holds every sweep size at once (sizes are measured interleaved)
    sweep = sum(job.sweep.sizes()) if job.cost is None else 0
    _check_memory(buffers + sweep, world, backend, "this replay", where)


def check_sweep(sweep: Sweep, world: int, backend: str) -> None:
    """Calibration holds a buffer of every sweep size at once (they are interleaved)."""
    _check_memory(sum(sweep.sizes()), world, backend, "this calibration", None)
