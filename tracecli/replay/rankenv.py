"""The environment NCCL ranks run in: two variables that silently break a replay's overlap.

- ``TORCH_NCCL_BLOCKING_WAIT`` (or its old name ``NCCL_BLOCKING_WAIT``; torch 2.13's
  include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:59-62, "whether or not wait()
  is blocking"; :352-355, ``wait()`` "will block the CPU thread until the NCCL work is
  completed"; ProcessGroupNCCL.cpp ``WorkNCCL::wait``: ``if (blockingWait_ ...) while
  (!isCompleted())``): the host stops enqueueing the backward's spin at the first bucket's
  wait, so compute never overlaps communication; the watchdog is off too.
- ``CUDA_DEVICE_MAX_CONNECTIONS=1`` (set in Megatron's containers, so that its
  communication kernels are issued before the compute that follows): every stream then
  feeds one hardware queue, and a kernel waits for everything queued before it on any
  stream; the spin, the collectives and the side stream's waits can serialise.

Spawned ranks run without them (:func:`clear`, called first thing in each rank) and the
command says so (:func:`spawned_notice`). Under torchrun the ranks are not ours to change:
blocking wait is refused (no measurement would mean anything), one device connection is
warned about (:func:`torchrun_check`). Nothing here imports torch.
"""

from __future__ import annotations

import os
from typing import Mapping, MutableMapping, Optional

from ..errors import ReplayUnavailableError

__all__ = ["BLOCKING_WAIT", "CONNECTIONS", "clear", "spawned_notice", "torchrun_check"]

BLOCKING_WAIT = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")
CONNECTIONS = "CUDA_DEVICE_MAX_CONNECTIONS"
_OFF = ("", "0", "false", "no", "off")


def _blocking(environ: Mapping[str, str]) -> list[str]:
    return [f"{name}={environ[name]}" for name in BLOCKING_WAIT
            if environ.get(name, "").strip().lower() not in _OFF]


def _one_connection(environ: Mapping[str, str]) -> bool:
    return environ.get(CONNECTIONS, "").strip() == "1"


def clear(environ: Optional[MutableMapping[str, str]] = None) -> None:
    """Remove the variables from a spawned rank's environment (before CUDA or NCCL read
    them: the context reads ``CUDA_DEVICE_MAX_CONNECTIONS`` when it is made, the process
    group ``TORCH_NCCL_BLOCKING_WAIT`` when it is constructed)."""
    environ = os.environ if environ is None else environ
    for name in (*BLOCKING_WAIT, CONNECTIONS):
        environ.pop(name, None)


def spawned_notice(environ: Mapping[str, str]) -> Optional[str]:
    """What spawned NCCL ranks run without, and why; ``None`` when nothing is set.

    >>> spawned_notice({"TORCH_NCCL_BLOCKING_WAIT": "1"})
    'the ranks run without TORCH_NCCL_BLOCKING_WAIT=1 (wait() would block the host: no overlap)'
    """
    said = [f"{setting} (wait() would block the host: no overlap)" for setting in _blocking(environ)]
    if CONNECTIONS in environ:
        said.append(f"{CONNECTIONS}={environ[CONNECTIONS]} (CUDA's default: the streams may "
                    "not serialise)")
    return "the ranks run without " + " and ".join(said) if said else None


def torchrun_check(environ: Mapping[str, str]) -> Optional[str]:
    """Under torchrun, with NCCL: refuse blocking wait; a warning for one device connection."""
    blocking = _blocking(environ)
    if blocking:
        raise ReplayUnavailableError(f"{', '.join(blocking)} makes every wait() block the host, so "
                                     "no compute would overlap communication: unset it for the "
                                     "replay (torchrun passes its environment to the ranks)")
    if _one_connection(environ):
        return (f"{CONNECTIONS}=1: every CUDA stream shares one hardware queue, so the spin and "
                "the collectives may serialise and overlap measure low; unset it for the replay")
    return None
