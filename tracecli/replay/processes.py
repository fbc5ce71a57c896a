"""Starting ranks, watching them, and tearing all of them down when one fails.

``--gpus N`` spawns N local ranks talking over 127.0.0.1; under ``torchrun`` (RANK,
WORLD_SIZE, MASTER_ADDR set) this process joins that world instead (:mod:`.torchrun`). A
rank that raises, exits or hangs stops every rank within ``Ranks.timeout_s``: SIGTERM,
then SIGKILL after a short grace, and one message naming the rank and why (:mod:`.watch`).
"""

from __future__ import annotations

import os
import queue as queue_module
import socket
import time
from typing import Callable, Optional

from ..errors import ReplayError, ReplayUnavailableError
from .jobs import Ranks, collective_timeout_s, step_ms
from .rankenv import spawned_notice, torchrun_check
from .torchrun import agree, in_torchrun, joined_store, nccl_refusal, require_local_rank, \
    world_store
from .watch import Watch

__all__ = ["require_torch", "resolve_backend", "in_torchrun", "start", "GRACE_S",
           "check_capacity", "cpu_rank_bound"]

GRACE_S = 3.0
Progress = Optional[Callable[[str, int, int], None]]


def require_torch():
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise ReplayUnavailableError("replay and calibrate need torch: "
                                     "pip install 'tracecli[replay]'") from None
    if not dist.is_available():
        raise ReplayUnavailableError("this torch build has no torch.distributed; "
                                     "install a build with it: pip install 'tracecli[replay]'")
    return torch


def resolve_backend(ranks: Ranks) -> tuple[str, Optional[str]]:
    """(backend, notice): auto is NCCL when enough CUDA devices are visible, else gloo; under
    torchrun, every process of the world agrees (:mod:`.torchrun`). NCCL ranks' environment
    is checked (:mod:`.rankenv`)."""
    torch = require_torch()
    import torch.distributed as dist

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    built = dist.is_nccl_available()
    if in_torchrun():
        backend, notice = _torchrun_backend(ranks, visible, built)
        return backend, (torchrun_check(os.environ) if backend == "nccl" else None) or notice
    backend, notice = _local_backend(ranks, visible, built)
    return backend, spawned_notice(os.environ) if backend == "nccl" else notice


def _local_backend(ranks: Ranks, visible: int, built: bool) -> tuple[str, Optional[str]]:
    local = ranks.gpus
    if ranks.backend == "nccl":
        if not built:
            raise ReplayUnavailableError("this torch build has no NCCL; use --backend gloo")
        if visible < local:
            raise ReplayUnavailableError(f"--backend nccl needs {local} CUDA devices "
                                         f"on this node, {visible} visible; lower --gpus or use "
                                         "--backend gloo")
        return "nccl", None
    if ranks.backend == "gloo":
        return "gloo", None
    if visible >= local and built:
        return "nccl", None
    return "gloo", (f"{visible} CUDA devices visible for {local} ranks: running gloo on CPU")


def _torchrun_backend(ranks: Ranks, visible: int, built: bool) -> tuple[str, Optional[str]]:
    if ranks.backend == "gloo":
        return "gloo", None
    refusal = nccl_refusal(os.environ, visible, built)
    if ranks.backend == "nccl":
        require_local_rank(os.environ)
        if refusal is not None:
            raise ReplayUnavailableError(f"--backend nccl: {refusal}; use --backend gloo")
        return "nccl", None
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return agree(world_store(ranks.timeout_s), rank, world, refusal)


def cpu_rank_bound() -> tuple[int, str]:
    """How many CPU ranks this machine holds: two per core, within available memory."""
    from .validate import RANK_OVERHEAD_BYTES, available_memory

    cores = os.cpu_count() or 1
    bound, why = 2 * cores, f"{cores} cores, two ranks each"
    memory = available_memory()
    if memory is not None and memory // RANK_OVERHEAD_BYTES < bound:
        bound = max(1, memory // RANK_OVERHEAD_BYTES)
        why = f"{memory / 2**30:.1f} GiB available, ~{RANK_OVERHEAD_BYTES >> 20} MB a rank"
    return bound, why


def check_capacity(ranks: int, backend: str, oversubscribe: bool = False) -> None:
    """Refuse more local ranks than the machine can hold, unless told to."""
    if oversubscribe:
        return
    if backend == "gloo":
        bound, why = cpu_rank_bound()
        if ranks > bound:
            raise ReplayUnavailableError(f"{ranks} CPU ranks are more than this "
                                         f"machine holds ({bound}: {why}); lower --gpus or "
                                         "pass --oversubscribe")


def start(job, settings: Ranks, progress: Progress = None):
    """Run ``job`` on ``settings.gpus`` ranks (or in the torchrun world); rank 0's payload.

    In a torchrun world every process calls this; ranks other than 0 return ``None``.
    """
    require_torch()
    backend, _ = resolve_backend(settings)
    if in_torchrun():
        return _join(job, settings, backend, progress)
    return _spawn(job, settings, backend, progress)


def _join(job, settings: Ranks, backend: str, progress: Progress):
    """This process's part of a torchrun world; torchrun tears the world down on failure."""
    from .worker import describe, run_rank

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = require_local_rank(os.environ) if backend == "nccl" else 0
    try:
        return run_rank(rank, world, local, backend, job, settings,
                        progress if rank == 0 else None, joined_store())
    except Exception as exc:  # noqa: BLE001 - one line
        raise ReplayError(f"rank {rank} failed: {describe(exc)[0]}") from exc


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(processes) -> None:
    for p in processes:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + GRACE_S
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join(5)


class _Starting:
    """Progress from the first instant: seconds pass before a rank says anything (torch's
    import, the rendezvous), then the ranks' own stages."""

    def __init__(self, progress: Progress, ranks: int):
        self.progress, self.ranks = progress, ranks
        self.stage = f"starting {ranks} ranks" if progress else None
        if progress:
            progress(self.stage, 0, ranks)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.progress:
            return
        if self.stage is not None:  # the ranks are up and working
            self.progress(self.stage, self.ranks, self.ranks)
            self.stage = None
        self.progress(stage, done, total)


def _spawn(job, settings: Ranks, backend: str, progress: Progress):
    """``settings.gpus`` local ranks, each a spawned process, watched until they finish."""
    import multiprocessing

    from .child import rank_main

    context = multiprocessing.get_context("spawn")
    channel = context.Queue()
    port = _free_port()
    processes = [context.Process(target=rank_main, name=f"tracecli-rank{r}",
                                 args=(os.getpid(), r, settings.gpus, port, backend, job, settings,
                                       channel))
                 for r in range(settings.gpus)]
    stall_s = collective_timeout_s(job, settings.timeout_s, "nccl") + step_ms(job) / 1000.0
    watch = Watch(settings.gpus, settings.timeout_s, stall_s, time.monotonic())
    report = _Starting(progress, settings.gpus)
    alive: list[int] = []
    try:
        for p in processes:
            p.start()
        _watch(processes, channel, watch, report)
    except KeyboardInterrupt:  # stop every rank, then let the CLI exit 130
        _stop(processes)
        raise
    finally:
        alive = [r for r, p in enumerate(processes) if p.is_alive()]
        _stop(processes)
        channel.close()
    return watch.verdict(alive)


def _watch(processes, channel, watch: Watch, report) -> None:
    """Read the ranks' messages and exits until :meth:`Watch.done`."""
    while True:
        try:
            message = channel.get(timeout=0.1)
        except queue_module.Empty:
            message = None
        now = time.monotonic()
        if message is not None:
            if message[0] == "progress":
                report(*message[1:])
            else:
                watch.heard(message, now)
        for r, p in enumerate(processes):
            if p.exitcode is not None:
                watch.exited(r, p.exitcode, now)
        if watch.done(now, message is None):
            return
