"""The entry point of a spawned rank, made safe before anything slow happens.

A spawned rank spends seconds importing torch. If the launcher dies in those seconds
(SIGKILL, a crash), nothing may be left behind: so the first thing a rank does, before
importing torch, is ask the kernel to kill it when its parent dies (Linux
``PR_SET_PDEATHSIG``), then check that the parent it was started by is still its parent
(it may have died before the request). Then it drops the environment variables that
would silently break a replay's overlap (:mod:`.rankenv`), before CUDA or NCCL read them;
only then does it import the worker.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["rank_main", "die_with_parent"]

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def rank_main(parent: int, rank: int, world: int, port: int, backend: str, job, launch, queue) -> None:
    die_with_parent(parent)
    from .rankenv import clear

    clear()
    from .worker import spawn_main  # torch: seconds

    spawn_main(rank, world, port, backend, job, launch, queue)
