"""A fake NCCL process group across real processes, over gloo, for tests of the launcher.

:func:`activate` (called by ``tests/fakecuda_site/sitecustomize.py`` in every process whose
environment holds ``TRACECLI_FAKE_CUDA``) fakes ``torch.cuda`` (:mod:`fake_cuda`) and makes
``init_process_group("nccl", ...)`` a gloo group that behaves as NCCL does where the
launcher can tell:

- the ranks of a fake NCCL group rendezvous under their own store prefix, so ranks that
  chose different backends never meet (as NCCL and gloo ranks would not);
- gloo is given a day to time out; instead a watchdog does what ProcessGroupNCCL's does
  (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, ``Watchdog::runLoop``): a collective
  older than the group's timeout (``WorkNCCL::checkTimeout`` measures from the work's
  creation, ``workStartTime_``) is reported, the watchdog sleeps 4 x
  ``TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC`` (default 15 s: ``HeartbeatMonitor``'s
  ``getDumpTimeout() * 4``, "60 seconds"), then the process aborts (SIGABRT: the exception
  rethrown on the watchdog thread);
- collectives take virtual time on the fake device as in :mod:`fake_cuda` (the latest
  rank's ready time comes from one more gloo all-reduce).

Each NCCL init appends one JSON line to ``config["log"]`` (if given): the rank, the timeout
the group was given, the device bound, and the environment variables that change NCCL's
behaviour, as the rank saw them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import threading
import time

WATCHED_ENV = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "CUDA_DEVICE_MAX_CONNECTIONS")
_COLLECTIVES = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
                "barrier", "all_gather")


class Watchdog:
    """NCCL's watchdog, as the launcher sees it: a collective pending longer than the
    group's timeout aborts the process after the dump wait."""

    def __init__(self, rank: int, timeout_s: float):
        self.rank, self.timeout_s = rank, timeout_s
        self.started = None
        self.stopped = False
        threading.Thread(target=self._run, daemon=True, name="fake-nccl-watchdog").start()

    @contextlib.contextmanager
    def pending(self):
        self.started = time.monotonic()
        try:
            yield
        finally:
            self.started = None

    def _run(self) -> None:
        while not self.stopped:
            time.sleep(0.02)
            started = self.started
            if started is not None and time.monotonic() - started > self.timeout_s:
                sys.stderr.write(f"[Rank {self.rank}] Watchdog caught collective operation "
                                 f"timeout (fake NCCL, {self.timeout_s:g} s)\n")
                sys.stderr.flush()
                dump_ms = int(os.environ.get("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "15000"))
                time.sleep(4 * dump_ms / 1000.0)
                os.abort()


def _nbytes(args) -> int:
    import torch

    for a in args:
        if isinstance(a, torch.Tensor):
            return a.numel() * a.element_size()
    return 0


def activate(config: dict) -> None:
    import torch
    import torch.distributed as dist

    from fake_cuda import Clock, FakeCuda
    from tracecli.replay import worker

    cuda = FakeCuda(config.get("devices", 2), config.get("free", 70 << 30),
                    config.get("total", 80 << 30),
                    Clock(config.get("cycles_per_ms", 1.0e6)))
    for name in FakeCuda.FUNCTIONS:
        setattr(torch.cuda, name, getattr(cuda, name))
    dist.is_nccl_available = lambda: True

    def rank_device(backend, local_rank):
        if backend == "nccl":
            if not 0 <= local_rank < cuda.count:  # torch.device("cuda", k) + set_device
                raise RuntimeError("CUDA error: invalid device ordinal")
            cuda.bind(local_rank)
        return torch.device("cpu")

    worker.rank_device = rank_device
    state: dict = {"watchdog": None}
    real = {name: getattr(dist, name) for name in _COLLECTIVES
            + ("init_process_group", "destroy_process_group", "new_group")}
    streams: dict = {}  # a subgroup's NCCL stream on this rank's device

    def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1,
                           rank=-1, store=None, **kw):
        device_id = kw.pop("device_id", None)
        if backend != "nccl":
            return real["init_process_group"](backend, init_method, timeout, world_size, rank,
                                              store, **kw)
        if store is None:
            store, rank, world_size = next(dist.rendezvous("env://", timeout=timeout))
        if config.get("log"):
            line = {"rank": rank, "timeout_s": timeout.total_seconds(), "device": cuda.current_device(),
                    "device_id": str(device_id), "env": {k: os.environ.get(k) for k in WATCHED_ENV}}
            with open(config["log"], "a") as f:
                f.write(json.dumps(line) + "\n")
        store = dist.PrefixStore("fake-nccl", store)
        store.set_timeout(timeout)  # NCCL's ranks meet within the group's timeout, or fail
        store.add("arrived", 1)
        deadline = time.monotonic() + timeout.total_seconds()
        while store.add("arrived", 0) < world_size:
            if time.monotonic() > deadline:
                raise RuntimeError("fake NCCL: the other ranks never joined (timed out)")
            time.sleep(0.05)
        real["init_process_group"]("gloo", store=store, rank=rank, world_size=world_size,
                                   timeout=datetime.timedelta(days=1))
        state["watchdog"] = Watchdog(rank, timeout.total_seconds())

    def destroy_process_group(*args, **kw):
        if state["watchdog"] is not None:
            state["watchdog"].stopped = True
            state["watchdog"] = None
        return real["destroy_process_group"](*args, **kw)

    def new_group(ranks=None, timeout=None, backend=None, **kw):
        """An NCCL subgroup: a gloo group of the same ranks, with an NCCL stream of its own
        on the device (ProcessGroupNCCL keeps one per device per group)."""
        if backend != "nccl" or state["watchdog"] is None:
            return real["new_group"](ranks, timeout, backend, **kw)
        kw.pop("device_id", None)
        group = real["new_group"](ranks, datetime.timedelta(days=1), "gloo", **kw)
        if group is not None and group != dist.GroupMember.NON_GROUP_MEMBER:
            from fake_cuda import FakeStream

            device = cuda.device()
            stream = FakeStream(device, f"nccl{len(cuda.side_streams(device))}")
            cuda._side.setdefault(device.index, []).append(stream)
            streams[group] = stream
        return group

    def agree_on(group):
        def agree(ready: float, free: float):
            t = torch.tensor([ready, free], dtype=torch.float64)
            real["all_reduce"](t, op=dist.ReduceOp.MAX, group=group)
            return float(t[0]), float(t[1])
        return agree

    def wrap(name):
        def collective(*args, async_op=False, **kw):
            watchdog = state["watchdog"]
            if watchdog is None:
                return real[name](*args, async_op=async_op, **kw)
            kw.pop("device_ids", None)
            with watchdog.pending():
                real[name](*args, **kw)
                group = kw.get("group")
                work = cuda.device().collective(name, _nbytes(args), agree_on(group),
                                                streams.get(group))
            if async_op:
                return work
            work.wait()
            cuda.device().host_ms = max(cuda.device().host_ms, work.end)
            return None
        return collective

    dist.init_process_group = init_process_group
    dist.new_group = new_group
    dist.destroy_process_group = destroy_process_group
    for name in _COLLECTIVES:
        setattr(dist, name, wrap(name))
