"""An FSDP step on the GPU (NCCL): compute is spin kernels on the compute stream, and each
collective is enqueued where FSDP issues it, on a process group of its channel, so NCCL's
stream for that group waits on the GPU for the compute before it (as FSDP's all-gather
stream waits for the current stream: ``_fsdp_param_group.py`` ``unshard``).

- A collective is issued from a stream of its channel that first waits for the compute
  stream (so it starts no earlier than the compute point FSDP issues it at) and, where it
  follows another collective (HSDP's all-reduce after its reduce-scatter), for that one's
  work; compute never waits for it there.
- Before a compute span, the compute stream waits for the collectives that span needs
  (``Work.wait()`` blocks the current stream, not the host: FSDP's ``wait_for_unshard``).
- Each collective's end is an event recorded on a stream of its channel right after it
  (one stream a channel, so a channel's ends keep their order); its launch an event on the
  compute stream where it is issued. Start times follow: a collective starts once it is
  launched, the one before it on its channel has ended, and the one it follows has.
- Compute as it ran is the spin kernels' own device time (bracketed by events), without the
  waits; the spin is rescaled every step as :class:`~.emulator.CudaStep` does.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

import torch

from .buckets import BucketBuffer
from .emulator import Beat, CudaStep
from .records import StepTimes

__all__ = ["FsdpCudaStep", "channel_starts"]


def channel_starts(comms, launches: Sequence[float], ends: Sequence[float]) -> tuple:
    """When each collective started: its launch, the end of the one before it on its
    channel, and the end of the one it follows, whichever is latest.

    >>> from types import SimpleNamespace as C
    >>> comms = [C(channel="a", follows=None), C(channel="b", follows=None),
    ...          C(channel="a", follows=1)]
    >>> channel_starts(comms, [0.0, 0.0, 1.0], [2.0, 3.0, 5.0])
    (0.0, 0.0, 3.0)
    """
    last: dict[str, float] = {}
    starts = []
    for j, c in enumerate(comms):
        at = max(launches[j], last.get(c.channel, 0.0))
        if c.follows is not None:
            at = max(at, ends[c.follows])
        starts.append(at)
        last[c.channel] = ends[j]
    return tuple(starts)


class FsdpCudaStep(CudaStep):
    """NCCL on the current device: one process group and two streams a channel (see the
    module's docstring)."""

    def __init__(self, buffers: Sequence[BucketBuffer], comm, comms: dict, device,
                 beat: Beat = None):
        super().__init__(buffers, comm, device, beat)
        self.comms = comms
        self.groups: list = []
        channels = sorted({channel for channel, _ in comms})
        self.issuers = {ch: torch.cuda.Stream(device=device) for ch in channels}
        self.enders = {ch: torch.cuda.Stream(device=device) for ch in channels}

    def run(self, schedule) -> StepTimes:
        comms = schedule.comms
        self.groups = [self.comms[(c.channel, c.family)] for c in comms]
        event = partial(torch.cuda.Event, enable_timing=True)
        start, compute_end, update, stop = event(), event(), event(), event()
        launched = [event() for _ in comms]
        ended = [event() for _ in comms]
        works: list = [None] * len(comms)
        spun: list = []
        by_after: dict[int, list[int]] = {}
        for j, c in enumerate(comms):
            by_after.setdefault(c.after, []).append(j)

        def issue(j: int) -> None:
            c = comms[j]
            launched[j].record()  # on the compute stream: the point FSDP issues it at
            issuer = self.issuers[c.channel]
            issuer.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(issuer):
                if c.follows is not None:
                    works[c.follows].wait()
                works[j] = self.buffers[j].launch(self.groups[j], async_op=True)
            ender = self.enders[c.channel]
            with torch.cuda.stream(ender):
                works[j].wait()
                ended[j].record(ender)

        self._begin()
        start.record()
        for k, (ms, waits) in enumerate(zip(schedule.spans, schedule.waits)):
            for j in by_after.pop(k, ()):
                issue(j)
            for w in waits:
                works[w].wait()  # the compute stream waits; the host goes on
            self._spin(ms, event(), spun)
        for rest in sorted(by_after):  # issued past the last span (none in FSDP's rules)
            for j in by_after[rest]:
                issue(j)
        compute_end.record()
        for work in works:
            work.wait()
        update.record()
        self._spin(schedule.update_ms, stop, spun)
        torch.cuda.synchronize(self.device)
        busy = sum(before.elapsed_time(after) for before, after, _ in spun)
        self.spin.rescale(sum(cycles for _, _, cycles in spun), busy)
        launches = tuple(start.elapsed_time(e) for e in launched)
        ends = tuple(start.elapsed_time(e) for e in ended)
        return StepTimes(start.elapsed_time(stop), launches, channel_starts(comms, launches, ends),
                         ends, busy)

    def bare(self, index: int) -> float:
        """ms of one blocking run of collective ``index`` alone on its own group, behind a
        short spin (as :meth:`.CudaStep.bare`)."""
        from .emulator import BARE_LEAD_MS

        ready, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self._begin()
        self._spin(BARE_LEAD_MS, ready, [])
        self.buffers[index].launch(self.groups[index])
        stop.record()
        torch.cuda.synchronize(self.device)
        return ready.elapsed_time(stop)
