"""An FSDP step on real ranks (gloo, CPU; the GPU's is :mod:`.fsdp_cuda`): compute waits for the all-gathers it needs, and
all-gathers, reduce-scatters and HSDP all-reduces run on channels of their own.

Compute is a timed wait per span (as :class:`~.emulator.CpuStep` emulates it); before a span
it waits for the collectives the plan says it needs. Each channel is a thread with process
groups of its own (so its collectives keep their order on every rank, whatever the other
channels do), running its collectives one at a time in issue order, each once compute has
reached the point it is issued at and the collective it follows has ended. Every buffer is
the collective's own on its group: an all-gather's input is one rank's share, its output
every rank's in order; a reduce-scatter's input the whole padded tensor, its output this
rank's shard of the sum; verified per shard (:mod:`.buckets`).
"""

from __future__ import annotations

import os
import threading
from typing import Sequence

import torch

from ..model import CollectiveKind
from ..planning.fsdp.replay import ReplaySchedule, rank_groups, replay_schedule
from .buckets import DTYPES, BucketBuffer
from .emulator import Beat, CpuStep, _now_ms, wait_until
from .records import StepTimes

__all__ = ["GroupBuffer", "FsdpCpuStep", "fsdp_step"]


class GroupBuffer(BucketBuffer):
    """A bucket's buffers on the process group it runs on: filled and checked with this
    rank's place in that group."""

    def __init__(self, nbytes: int, dtype: str, collective: CollectiveKind, group: int,
                 local_rank: int, device):
        super().__init__(nbytes, dtype, collective, group, device)
        self.local_rank = local_rank

    def fill(self, rank: int) -> None:
        super().fill(self.local_rank)


def _groups(schedule: ReplaySchedule, comm) -> dict:
    """This rank's comm on each (channel, family) (every rank makes every group, in order)."""
    out = {}
    for channel, family in schedule.families():
        groups = rank_groups(family, comm.world, schedule.shard, schedule.replicate)
        out[(channel, family)] = comm.subgroups(groups)
    return out


def fsdp_step(plan, comm, device, backend: str, beat: Beat = None):
    """``(step, schedule, buffers)`` of an FSDP plan on this rank: on the GPU under NCCL
    (:mod:`.fsdp_cuda`), else on the CPU."""
    schedule = replay_schedule(plan)
    comms = _groups(schedule, comm)
    buffers = []
    for c in schedule.comms:
        mine = comms[(c.channel, c.family)]
        item = DTYPES.get(c.dtype, torch.float32).itemsize
        share = c.elements // c.group if c.kind is CollectiveKind.ALL_GATHER else c.elements
        buffers.append(GroupBuffer(share * item, c.dtype, c.kind, c.group, mine.rank, device))
    if backend == "nccl":
        from .fsdp_cuda import FsdpCudaStep

        return FsdpCudaStep(buffers, comm, comms, device, beat), schedule, buffers
    world = str(comm.world)
    step = FsdpCpuStep(buffers, comm, comms, os.environ.get("LOCAL_WORLD_SIZE", world) == world,
                       beat)
    return step, schedule, buffers


class FsdpCpuStep(CpuStep):
    """gloo on CPU: one thread a channel, compute on the calling thread."""

    def __init__(self, buffers: Sequence[BucketBuffer], comm, comms: dict, shared_clock: bool,
                 beat: Beat = None):
        super().__init__(buffers, comm, shared_clock, beat)
        self.comms = comms
        self.groups: list = []

    def run(self, schedule: ReplaySchedule) -> StepTimes:
        self.groups = [self.comms[(c.channel, c.family)] for c in schedule.comms]
        n = len(schedule.comms)
        ready = [threading.Event() for _ in range(n)]
        done = [threading.Event() for _ in range(n)]
        launches, starts, ends = [0.0] * n, [0.0] * n, [0.0] * n
        failure: list = []
        clock = [0.0]  # the step's start, set before any collective is released
        threads = [threading.Thread(target=self._channel, daemon=True,
                                    args=(schedule, name, clock, ready, done, starts, ends,
                                          failure))
                   for name in sorted({c.channel for c in schedule.comms})]
        for t in threads:  # started before the step's clock, so their start is not timed
            t.start()
        self.beat()
        t0 = clock[0] = self._start()
        by_after: dict[int, list[int]] = {}
        for j, c in enumerate(schedule.comms):
            by_after.setdefault(c.after, []).append(j)

        def release(spans_done: int) -> None:
            for j in by_after.pop(spans_done, ()):
                launches[j] = _now_ms() - t0
                ready[j].set()

        busy = 0.0  # compute as it ran: each span's own time, not its waits
        release(0)
        for k, (ms, waits) in enumerate(zip(schedule.spans, schedule.waits)):
            for j in waits:
                _wait(done[j], failure)
            began = _now_ms()
            wait_until(began + ms)
            busy += _now_ms() - began
            release(k + 1)
        for rest in sorted(by_after):  # issued past the last span (none in FSDP's rules)
            release(rest)
        for t in threads:
            while t.is_alive():
                t.join(0.05)
                if failure:
                    raise failure[0]
        if failure:
            raise failure[0]
        finished = _now_ms() - t0
        wait_until(t0 + finished + schedule.update_ms)
        iteration = _now_ms() - t0
        return StepTimes(iteration, tuple(launches), tuple(starts), tuple(ends),
                         busy + (iteration - finished if schedule.update_ms > 0 else 0.0))

    def _channel(self, schedule, name, clock, ready, done, starts, ends, failure) -> None:
        try:
            for j, c in enumerate(schedule.comms):
                if c.channel != name:
                    continue
                _wait(ready[j], failure)
                if c.follows is not None:
                    _wait(done[c.follows], failure)
                t0 = clock[0]
                starts[j] = _now_ms() - t0
                self.buffers[j].launch(self.groups[j])
                ends[j] = _now_ms() - t0
                done[j].set()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the compute thread
            failure.append(exc)
            for event in done + ready:
                event.set()

    def bare(self, index: int) -> float:
        """ms of one blocking run of collective ``index`` on its own group, after a barrier."""
        group = self.groups[index]
        self.beat()
        self.comm.barrier()
        t = _now_ms()
        self.buffers[index].launch(group)
        return _now_ms() - t


def _wait(event: threading.Event, failure: list) -> None:
    """Wait for ``event``; raise what another thread raised, if it failed meanwhile."""
    while not event.wait(0.05):
        if failure:
            raise failure[0]
    if failure:
        raise failure[0]
