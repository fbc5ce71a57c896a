"""Starting ranks, watching them, and tearing all of them down when one fails.

``--gpus N`` spawns N local ranks talking over 127.0.0.1; under ``torchrun`` (RANK,
WORLD_SIZE, MASTER_ADDR set) this process joins that world instead. A rank that raises,
exits or hangs (a collective times out after ``Ranks.timeout_s``) stops every rank:
SIGTERM, then SIGKILL after a short grace, and one message naming the rank and why.
"""

from __future__ import annotations

import os
import queue as queue_module
import signal
import socket
import time
from typing import Callable, Optional

from ..errors import ReplayError, ReplayUnavailableError
from .jobs import Ranks

__all__ = ["require_torch", "resolve_backend", "in_torchrun", "start", "GRACE_S",
           "check_capacity", "cpu_rank_bound"]

GRACE_S = 3.0
Progress = Optional[Callable[[str, int, int], None]]
_NOISE = ("Connection closed by peer", "Connection reset", "Broken pipe", "timed out",
          "Timed out", "Timeout", "connection", "ECONNRESET")


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


def in_torchrun() -> bool:
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def resolve_backend(ranks: Ranks) -> tuple[str, Optional[str]]:
    """(backend, notice): auto is NCCL when enough CUDA devices are visible, else gloo."""
    torch = require_torch()
    import torch.distributed as dist

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    local = int(os.environ.get("LOCAL_WORLD_SIZE", ranks.gpus)) if in_torchrun() else ranks.gpus
    if ranks.backend == "nccl":
        if not dist.is_nccl_available():
            raise ReplayUnavailableError("this torch build has no NCCL; use --backend gloo")
        if visible < local:
            raise ReplayUnavailableError(f"--backend nccl needs {local} CUDA devices "
                                         f"on this node, {visible} visible; lower --gpus or use "
                                         "--backend gloo")
        return "nccl", None
    if ranks.backend == "gloo":
        return "gloo", None
    if visible >= local and dist.is_nccl_available():
        return "nccl", None
    return "gloo", (f"{visible} CUDA devices visible for {local} ranks: running gloo on CPU")


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


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _root_cause(errors: list[tuple[int, str]]) -> tuple[int, str]:
    """The first error that is not just another rank noticing the failure."""
    for rank, text in errors:
        if not any(word in text for word in _NOISE):
            return rank, text
    return errors[0]


def start(job, settings: Ranks, progress: Progress = None):
    """Run ``job`` on ``settings.gpus`` ranks (or in the torchrun world); rank 0's payload.

    In a torchrun world every process calls this; ranks other than 0 return ``None``.
    """
    require_torch()
    backend, _ = resolve_backend(settings)

    if in_torchrun():
        from .worker import run_rank

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
        try:
            return run_rank(rank, world, local, backend, job, settings,
                            progress if rank == 0 else None)
        except Exception as exc:  # noqa: BLE001 - one line, torchrun tears the world down
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ReplayError(f"rank {rank} failed: {type(exc).__name__}: {first}") from exc

    import multiprocessing

    from .child import rank_main

    context = multiprocessing.get_context("spawn")
    channel = context.Queue()
    port = _free_port()
    processes = [context.Process(target=rank_main, name=f"tracecli-rank{r}",
                                 args=(os.getpid(), r, settings.gpus, port, backend, job, settings,
                                       channel))
                 for r in range(settings.gpus)]
    starting = None
    if progress:  # seconds pass before a rank says anything (torch's import, the rendezvous)
        starting = f"starting {settings.gpus} ranks"
        progress(starting, 0, settings.gpus)
    result, errors, failed_at = None, [], None
    try:
        for p in processes:
            p.start()
        while True:
            try:
                message = channel.get(timeout=0.1)
            except queue_module.Empty:
                message = None
            if message is not None:
                if message[0] == "progress" and progress:
                    if starting is not None:  # the ranks are up and working
                        progress(starting, settings.gpus, settings.gpus)
                        starting = None
                    progress(*message[1:])
                elif message[0] == "result":
                    result = message[1]
                elif message[0] == "error":
                    errors.append((message[1], message[2]))
                    failed_at = failed_at or time.monotonic()
            exits = [(r, p.exitcode) for r, p in enumerate(processes) if p.exitcode is not None]
            bad = [(r, c) for r, c in exits if c != 0]
            if bad and failed_at is None:
                failed_at = time.monotonic()
            if failed_at is not None and (time.monotonic() - failed_at > 0.5 or len(exits) == len(processes)):
                break
            if len(exits) == len(processes) and message is None:
                break
    except KeyboardInterrupt:  # stop every rank, then let the CLI exit 130
        _stop(processes)
        raise
    finally:
        exited = {r: p.exitcode for r, p in enumerate(processes) if p.exitcode is not None}
        alive_before_stop = [r for r, p in enumerate(processes) if p.is_alive()]
        _stop(processes)
        channel.close()
    reported = {rank for rank, _ in errors}
    silent = [(r, c) for r, c in sorted(exited.items()) if c != 0 and r not in reported]
    if silent:  # died without a word (os._exit, a signal, the OOM killer): the root cause
        rank, code = silent[0]
        raise ReplayError(f"rank {rank} {_describe_exit(code)}; all "
                          f"{len(processes)} ranks stopped")
    if errors:
        rank, text = _root_cause(errors)
        hung = [r for r in alive_before_stop if r not in reported]
        suffix = f"; rank {', '.join(map(str, hung))} did not respond (hung?)" if hung and \
            any(w in text for w in _NOISE) else ""
        raise ReplayError(f"rank {rank} failed: {text}{suffix}; all "
                          f"{len(processes)} ranks stopped")
    if result is None:
        raise ReplayError("the ranks finished without a result")
    return result
