"""One rank's process: join the process group, do the rank's work, leave the group.

Runs under the launcher's spawned processes (``spawn_main``) or as a process of a
``torchrun`` world (``run_rank`` directly). The work itself (:func:`.rankwork.rank_work`)
sees the group only through a :class:`~.comm.TorchComm`. Rank 0 returns the gathered payload.
"""

from __future__ import annotations

import datetime
import os
import socket
from typing import Optional

import torch
import torch.distributed as dist

from .comm import TorchComm
from .jobs import Ranks
from .rankwork import Progress, rank_work
from .records import ReplayRun, SweepRun

__all__ = ["spawn_main", "run_rank", "rank_device"]


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


def spawn_main(rank: int, world: int, port: int, backend: str, job, ranks: Ranks, queue) -> None:
    """Entry point of a spawned rank (through :mod:`.child`): results, progress and errors
    go through ``queue``; every socket it opens is on the loopback interface."""
    os.environ.update({"MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port),
                       "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"})
    code = 0
    try:
        def progress(stage: str, done: int, total: int) -> None:
            queue.put(("progress", stage, done, total))

        store, _listener = local_store(rank, world, port, ranks.timeout_s)
        payload = run_rank(rank, world, rank, backend, job, ranks, progress if rank == 0 else None,
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


def rank_device(backend: str, local_rank: int) -> torch.device:
    """The device a rank's buffers live on: its GPU under NCCL (the local rank's), else the CPU."""
    return torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")


def run_rank(rank: int, world: int, local_rank: int, backend: str, job, ranks: Ranks,
             progress: Progress = None, store=None) -> Optional[ReplayRun | SweepRun]:
    """One rank's work in a process group it joins and leaves; ``store``: the rendezvous
    (None under torchrun: its environment). Rank 0 returns the run
    (:class:`~.runs.ReplayRun` or :class:`~.runs.SweepRun`)."""
    device = rank_device(backend, local_rank)
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=ranks.timeout_s),
                            **({"store": store} if store is not None else {}),
                            **({"device_id": device} if backend == "nccl" else {}))
    try:
        return rank_work(job, TorchComm(rank, world, backend, device), device, backend, ranks,
                         progress)
    finally:
        dist.destroy_process_group()
