"""One rank's process: join the process group, do the rank's work, leave the group.

Runs under the launcher's spawned processes (``spawn_main``) or as a process of a
``torchrun`` world (``run_rank`` directly). The work itself (:func:`.rankwork.rank_work`)
sees the group only through a :class:`~.comm.TorchComm`. Rank 0 returns the gathered payload.

A spawned rank tells the launcher how far it got (:class:`Heartbeat`: how many steps it
has begun, from a thread, so a rank blocked in a collective still answers) and, when it
fails, why: its error is sent *before* the process group is destroyed, since
``destroy_process_group()`` can block on peers that will never come.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import warnings
from typing import Optional

import torch
import torch.distributed as dist

from ..errors import TraceCliError
from .comm import TorchComm
from .jobs import Ranks, collective_timeout_s
from .rankwork import Progress, rank_work
from .records import ReplayRun, SweepRun
from .validate import check_gpu_memory

__all__ = ["spawn_main", "run_rank", "rank_device", "Heartbeat", "describe"]


LOOPBACK = "127.0.0.1"
BEAT_S = 0.1  # how often a rank says how far it got (when it got further)


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


class Heartbeat:
    """Counts the steps a rank begins (``beat()``: one increment, nothing else on the
    rank's timed path) and sends ``("beat", rank, count)`` every :data:`BEAT_S` when it
    changed."""

    def __init__(self, rank: int, queue):
        self.rank, self.queue = rank, queue
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tracecli-beat")
        self._thread.start()

    def __call__(self) -> None:
        self.count += 1

    def _run(self) -> None:
        sent = 0
        while not self._stop.wait(BEAT_S):
            if self.count != sent:
                sent = self.count
                self.queue.put(("beat", self.rank, sent))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def describe(exc: BaseException) -> tuple[str, bool]:
    """One line about ``exc``, and whether it is the user's to fix (a
    :class:`~tracecli.errors.TraceCliError`: its own message)."""
    if isinstance(exc, TraceCliError):
        return str(exc)[:500], True
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}"[:500], False


def spawn_main(rank: int, world: int, port: int, backend: str, job, ranks: Ranks, queue) -> None:
    """Entry point of a spawned rank (through :mod:`.child`): results, progress and errors
    go through ``queue``; every socket it opens is on the loopback interface."""
    os.environ.update({"MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port),
                       "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"})
    sent: list = []

    def report(exc: BaseException) -> None:
        if not sent:
            sent.append(exc)
            queue.put(("error", rank, *describe(exc)))

    def progress(stage: str, done: int, total: int) -> None:
        queue.put(("progress", stage, done, total))

    code = 0
    beat = Heartbeat(rank, queue)
    try:
        store, _listener = local_store(rank, world, port, ranks.timeout_s)
        payload = run_rank(rank, world, rank, backend, job, ranks, progress if rank == 0 else None,
                           store, beat, report)
        if rank == 0:
            queue.put(("result", payload))
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, then exit
        report(exc)
        code = 1
    finally:
        beat.stop()
        queue.close()
        queue.join_thread()
    os._exit(code)


def rank_device(backend: str, local_rank: int) -> torch.device:
    """The device a rank's buffers live on: its GPU under NCCL (the local rank's), else the CPU."""
    return torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")


def run_rank(rank: int, world: int, local_rank: int, backend: str, job, ranks: Ranks,
             progress: Progress = None, store=None, beat=None,
             on_error=None) -> Optional[ReplayRun | SweepRun]:
    """One rank's work in a process group it joins and leaves; ``store``: the rendezvous
    (None under torchrun: its environment); ``beat``: called as each step begins;
    ``on_error(exc)``: called with a failure of the work before the group is destroyed.
    Rank 0 returns the run (:class:`~.records.ReplayRun` or :class:`~.records.SweepRun`).

    Under NCCL the device is set first (``init_process_group(device_id=...)`` then makes
    the communicator at once, distributed_c10d.py:1741-1748, and binds the group to it),
    and its free memory checked before the group is joined."""
    # torch 2.13 warns on every all-gather and reduce-scatter that their *_tensor names are
    # deprecated for *_single (distributed_c10d.py:4400, :4949): the same collectives
    warnings.filterwarnings("ignore", message=r".*is deprecated\. Please use "
                            r"`torch\.distributed\.\w+_single`", category=FutureWarning)
    device = rank_device(backend, local_rank)
    if backend == "nccl":
        torch.cuda.set_device(device)
        index = torch.cuda.current_device()
        check_gpu_memory(job, world, rank, index, *torch.cuda.mem_get_info(index))
    timeout = collective_timeout_s(job, ranks.timeout_s, backend)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout),
                            **({"store": store} if store is not None else {}),
                            **({"device_id": device} if backend == "nccl" else {}))
    try:
        return rank_work(job, TorchComm(rank, world, backend, device), device, backend, ranks,
                         progress, beat)
    except BaseException as exc:
        if on_error is not None:
            on_error(exc)
        raise
    finally:
        dist.destroy_process_group()
