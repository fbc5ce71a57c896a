"""A fake ``torch.cuda`` and a fake NCCL group: the CUDA replay path's logic without a GPU.

The device runs in *virtual* time (ms), so every figure a test reads is exact, whatever the
load of the machine running it:

- each device has a host clock (``host_ms``: advanced only by the host costs a test injects,
  and by calls that wait for the device), a compute stream (the default) and the NCCL
  stream a process group keeps (``nccl``); a stream's ``tail`` is when its last work ends;
- ``_sleep(cycles)`` (torch's ``spin_kernel``, one thread counting ``clock64()`` until it
  has seen ``cycles``: aten/src/ATen/cuda/Sleep.cu) runs on the current stream for
  ``cycles / rate`` ms, where the SM clock's rate may change over device time (drift);
- an event takes the time its stream reaches it; ``elapsed_time`` refuses an event not yet
  recorded or not yet complete as seen from the host, as CUDA does ("device not ready"); a
  ``wait`` makes a stream wait for an event;
- a collective is enqueued on the NCCL stream behind the *current* stream (NCCL's
  ``syncStream``: ProcessGroupNCCL records an event on the current stream and blocks its
  own stream on it), starts when every rank's inputs are ready and the channel is free, and
  takes ``duration(what, bytes, queued)`` ms; ``Work.wait()`` makes the current stream wait
  for it (``WorkNCCL::synchronizeStream``), never the host. A blocking collective (no
  ``async_op``) also moves the host to its end, as the ``.cpu()``/``.item()`` that reads its
  result does; a barrier blocks the host (``isBarrierOp_``).

Ranks of one process are threads; each thread is bound to a device (:meth:`FakeCuda.bind`).
:class:`FakeNcclWorld` is a :class:`~tracecli.replay.fakecomm.FakeWorld` whose collectives
carry each rank's ready time, so the start of a collective is the latest rank's.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Optional

import torch

from tracecli.replay.fakecomm import FakeComm, FakeWorld

__all__ = ["Clock", "FakeCuda", "FakeNcclWorld", "install", "transfer_ms"]

HostCost = Callable[[int, str], float]  # (device index, "launch" | "sleep" | "synchronize") -> ms


class Clock:
    """The SM clock: ``cycles_per_ms`` until the first change, then each ``(at_ms, rate)``."""

    def __init__(self, cycles_per_ms: float = 1.0e6, changes=()):
        self.base = cycles_per_ms
        self.changes = sorted(changes)

    def rate(self, t_ms: float) -> float:
        rate = self.base
        for at, value in self.changes:
            if t_ms >= at:
                rate = value
        return rate


def transfer_ms(what: str, nbytes: int, queued: bool) -> float:
    """Default collective time: 10 us + 1 GB/s (a queued one 20% faster, as measured on gloo)."""
    ms = 0.01 + nbytes / 1e6
    return ms * 0.8 if queued else ms


class FakeStream:
    def __init__(self, device: "FakeDevice", name: str):
        self.device, self.name, self.tail = device, name, 0.0

    def wait_event(self, event) -> None:
        self.tail = max(self.tail, event.time)

    def wait_stream(self, stream) -> None:
        self.tail = max(self.tail, stream.tail)

    def query(self) -> bool:
        return self.device.host_ms >= self.tail

    def synchronize(self) -> None:
        self.device.host_ms = max(self.device.host_ms, self.tail)


class FakeDevice:
    """One GPU: its host clock, streams and a log of what ran on it."""

    def __init__(self, cuda: "FakeCuda", index: int):
        self.cuda, self.index = cuda, index
        self.host_ms = 0.0
        self.compute = FakeStream(self, "compute")
        self.nccl = FakeStream(self, "nccl")
        self.current = self.compute
        self.ops: list[tuple] = []  # ("sleep", stream, cycles, start, ms) | ("record", stream, t)
        #                             | ("wait", stream, what, bytes, t) | ("sync", t)
        #                             | ("collective", what, bytes, start, end, queued)

    def cost(self, what: str) -> None:
        self.host_ms += self.cuda.host_cost(self.index, what)

    def sleep(self, cycles: int) -> None:
        self.cost("sleep")
        s = self.current
        start = max(s.tail, self.host_ms)
        ms = cycles / self.cuda.clock.rate(start)
        s.tail = start + ms
        self.ops.append(("sleep", s.name, int(cycles), start, ms))

    def synchronize(self) -> None:
        self.host_ms = max(self.host_ms, self.compute.tail, self.nccl.tail,
                           *(s.tail for s in self.cuda.side_streams(self)))
        self.ops.append(("sync", self.host_ms))
        self.cost("synchronize")

    def collective(self, what: str, nbytes: int, agree,
                   stream: Optional["FakeStream"] = None) -> "FakeWork":
        """Enqueue a collective on ``stream`` (its process group's NCCL stream; the
        default group's if None): ``agree(ready, channel_free)`` returns the latest of every
        rank's (its exchange doubles as the rendezvous)."""
        self.cost("launch")
        nccl = stream or self.nccl
        ready = max(self.current.tail, self.host_ms)
        latest_ready, latest_free = agree(ready, nccl.tail)
        start = max(latest_ready, latest_free)
        queued = latest_free > 0 and latest_free >= latest_ready
        end = start + self.cuda.duration(what, nbytes, queued)
        nccl.tail = end
        self.ops.append(("collective", what, nbytes, start, end, queued))
        return FakeWork(self, what, nbytes, end)


class FakeWork:
    """A started NCCL collective: ``wait()`` makes the current stream wait for it."""

    def __init__(self, device: FakeDevice, what: str, nbytes: int, end: float):
        self.device, self.what, self.nbytes, self.end = device, what, nbytes, end

    def wait(self) -> bool:
        s = self.device.current
        s.tail = max(s.tail, self.end)
        self.device.ops.append(("wait", s.name, self.what, self.nbytes, s.tail))
        return True

    def is_completed(self) -> bool:
        return self.device.host_ms >= self.end


class FakeCuda:
    """``devices`` fake GPUs with ``free`` of ``total`` bytes each; ``clock`` their SM clock;
    ``host_cost(index, what)`` ms the host spends on each call; ``duration(what, bytes,
    queued)`` ms a collective takes."""

    def __init__(self, devices: int = 2, free: int = 70 << 30, total: int = 80 << 30,
                 clock: Optional[Clock] = None, host_cost: Optional[HostCost] = None,
                 duration=transfer_ms, name: str = "Fake GPU"):
        self.count, self.free, self.total, self.name = devices, free, total, name
        self.clock = clock or Clock()
        self.host_cost: HostCost = host_cost or (lambda index, what: 0.0)
        self.duration = duration
        self.devices = [FakeDevice(self, i) for i in range(max(devices, 1))]
        self._side: dict[int, list[FakeStream]] = {}
        self._local = threading.local()
        self.set_device_calls: list[int] = []
        cuda = self

        class Event:
            def __init__(self, enable_timing=False, blocking=False, interprocess=False,
                         external=False):
                self.enable_timing, self.time, self.device = enable_timing, None, None

            def record(self, stream=None):
                s = stream or cuda.current_stream()
                dev = s.device
                self.device, self.time = dev, max(s.tail, dev.host_ms)
                s.tail = self.time
                dev.ops.append(("record", s.name, self.time))

            def wait(self, stream=None):
                (stream or cuda.current_stream()).wait_event(self)

            def query(self):
                return self.time is not None and self.device.host_ms >= self.time

            def synchronize(self):
                self.device.host_ms = max(self.device.host_ms, self.time)

            def elapsed_time(self, end):
                if not (self.enable_timing and end.enable_timing):
                    raise RuntimeError("Both events must be created with argument "
                                       "'enable_timing=True'.")
                if not (self.query() and end.query()):
                    raise RuntimeError("CUDA error: device not ready")
                return end.time - self.time

        def stream_class(device=None, priority=0):
            dev = cuda.device()
            s = FakeStream(dev, f"side{len(cuda._side.get(dev.index, []))}")
            cuda._side.setdefault(dev.index, []).append(s)
            return s

        self.Event, self.Stream = Event, stream_class

    # which device the calling thread works on
    def bind(self, index: int) -> None:
        self._local.index = index

    def device(self) -> FakeDevice:
        return self.devices[getattr(self._local, "index", 0)]

    def side_streams(self, device: FakeDevice) -> list[FakeStream]:
        return self._side.get(device.index, [])

    # the torch.cuda functions replay calls
    def is_available(self) -> bool:
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def set_device(self, device) -> None:
        index = device if isinstance(device, int) else device.index
        if index is None:
            return  # a CPU stand-in for the device (see install): the binding stays
        if not 0 <= index < self.count:
            raise RuntimeError("CUDA error: invalid device ordinal")
        self.set_device_calls.append(index)
        self.bind(index)

    def current_device(self) -> int:
        return self.device().index

    def current_stream(self, device=None) -> FakeStream:
        return self.device().current

    @contextlib.contextmanager
    def stream(self, stream):
        dev = stream.device
        before, dev.current = dev.current, stream
        try:
            yield stream
        finally:
            dev.current = before

    def synchronize(self, device=None) -> None:
        self.device().synchronize()

    def _sleep(self, cycles) -> None:
        self.device().sleep(int(cycles))

    def mem_get_info(self, device=None) -> tuple[int, int]:
        return self.free, self.total

    def get_device_name(self, device=None) -> str:
        return self.name

    FUNCTIONS = ("is_available", "device_count", "set_device", "current_device",
                 "current_stream", "stream", "synchronize", "_sleep", "mem_get_info",
                 "get_device_name", "Event", "Stream")


def install(monkeypatch, cuda: FakeCuda, nccl: bool = True) -> FakeCuda:
    """Put ``cuda`` in place of ``torch.cuda``'s functions (and say NCCL is built in); the
    rank's device becomes the CPU (tensors live there), its index bound to the thread."""
    import torch.distributed as dist

    from tracecli.replay import worker

    for name in FakeCuda.FUNCTIONS:
        monkeypatch.setattr(torch.cuda, name, getattr(cuda, name))
    if nccl:
        monkeypatch.setattr(dist, "is_nccl_available", lambda: True)

    def rank_device(backend: str, local_rank: int):
        if backend == "nccl":
            if not 0 <= local_rank < cuda.count:  # torch.device("cuda", k) + set_device
                raise RuntimeError("CUDA error: invalid device ordinal")
            cuda.bind(local_rank)
        return torch.device("cpu")

    monkeypatch.setattr(worker, "rank_device", rank_device)
    return cuda


class FakeNcclComm(FakeComm):
    """One rank of a :class:`FakeNcclWorld`: the data of :class:`FakeComm`, NCCL's timing."""

    def __init__(self, world: "FakeNcclWorld", rank: int, device: Optional[FakeDevice] = None,
                 stream: Optional[FakeStream] = None):
        super().__init__(world, rank)
        self.device = device or world.cuda.devices[rank]
        self.stream = stream  # None: the default group's NCCL stream
        self._work: Optional[FakeWork] = None

    def _sub_comm(self, world, rank):
        """A new process group: its own NCCL stream on this rank's device (ProcessGroupNCCL
        keeps a stream per device per group)."""
        stream = FakeStream(self.device, f"nccl{len(self._world.cuda.side_streams(self.device))}")
        self._world.cuda._side.setdefault(self.device.index, []).append(stream)
        return FakeNcclComm(world, rank, self.device, stream)

    def _exchange(self, what, value, nbytes):
        parts = []

        def agree(ready, free):
            exchanged = self._world.exchange(self.rank, what, (value, ready, free), nbytes)
            parts.extend(p[0] for p in exchanged)
            return max(p[1] for p in exchanged), max(p[2] for p in exchanged)

        self._work = self.device.collective(what, nbytes, agree, self.stream)
        return parts

    def _done(self, async_op: bool, host: bool = False):
        work = self._work
        if async_op:
            return work
        work.wait()  # the current stream waits; the host reads the result
        self.device.host_ms = max(self.device.host_ms, work.end)
        return None

    def all_reduce(self, tensor, op="sum", async_op=False):
        super().all_reduce(tensor, op)
        return self._done(async_op)

    def all_gather_into_tensor(self, out, inp, async_op=False):
        super().all_gather_into_tensor(out, inp)
        return self._done(async_op)

    def reduce_scatter_tensor(self, out, inp, async_op=False):
        super().reduce_scatter_tensor(out, inp)
        return self._done(async_op)

    def broadcast(self, tensor, src):
        super().broadcast(tensor, src)
        self._done(False)

    def barrier(self):
        super().barrier()
        self._done(False)

    def gather_objects(self, obj):
        result = super().gather_objects(obj)
        self._done(False)
        return result


class FakeNcclWorld(FakeWorld):
    """A :class:`FakeWorld` of NCCL ranks, each on its device of ``cuda``."""

    def __init__(self, world: int, cuda: FakeCuda, **kw):
        super().__init__(world, **kw)
        self.cuda = cuda

    def _spawn(self, world: int, **kw) -> "FakeNcclWorld":
        return FakeNcclWorld(world, self.cuda, **kw)

    def comm(self, rank: int) -> FakeNcclComm:
        self.cuda.bind(rank)  # called on the rank's own thread (run_fake)
        return FakeNcclComm(self, rank)
