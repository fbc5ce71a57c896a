"""Device time on GPU traces: when the device did what the host launched.

A GPU trace records the host's ops at host times and the device's activities (kernels,
memory copies and sets) at device times, each activity linked to the runtime call that
launched it by its correlation id. The host may run far ahead of the device (37 ms in a real
MI300X DDP trace), so a host time says nothing about when the device did the work.

A stream runs what it was given in the order it was given, so once the host has reached
time ``t`` the compute it launched until then is done on the device at

    D(t) = the latest end of the compute activities (not collective kernels) launched at or
           before t

which :meth:`DeviceClock.at` answers. An op's device span is ``[D(start), D(end)]``: from when
the device had done all the work launched before the op to when it had done the op's own
work too (an op that launched nothing takes no device time). A gradient is ready on the device
at ``D(end of its AccumulateGrad)``: the kernels its backward launched have finished. A
collective launched at ``t`` waits for ``D(t)`` (NCCL's stream waits on an event recorded
on the compute stream then) and runs when its kernel does.

A step on the device is its ``gpu_user_annotation`` ``ProfilerStep#K`` where the trace has
one; else from the first start to the last end of the activities launched during the
host's step, found by correlation id (with the host 37 ms ahead, the device's work of step
K runs during the host's step K+1: a time window would take the wrong work).

A trace (or step) with no device activity keeps host time: :class:`StepClock` then counts
from the host step's start.
"""

from __future__ import annotations

import bisect
from itertools import accumulate
from typing import NamedTuple, Optional

from .kineto_events import KinetoEvents

__all__ = ["DeviceClock", "StepClock", "step_clock"]


class DeviceClock:
    """``D(t)`` of a trace's compute, and its activities by host launch time."""

    def __init__(self, ev: KinetoEvents):
        compute, every, kernels = [], [], []
        for a in ev.device:
            where = ev.launches.get(a.correlation) if a.correlation is not None else None
            if where is None:
                continue  # no launch to link it to: it cannot be placed in a step
            every.append((where[1], a.ts, a.end))
            if not a.collective:
                compute.append((where[1], a.end))
                if a.kernel:
                    kernels.append((where[1], a.ts, a.end))
        compute.sort()
        every.sort()
        kernels.sort()
        self._launch = [t for t, _ in compute]
        self._done = list(accumulate((end for _, end in compute), max))
        self._every_launch = [t for t, _, _ in every]
        self._every = every
        self._kernel_launch = [t for t, _, _ in kernels]
        self._kernels = kernels
        self._steps = {label: (ts, end) for label, ts, end in ev.device_steps}
        self.activities = len(every)

    def at(self, t: float) -> Optional[float]:
        """The device time by which the compute launched until host time ``t`` was done;
        ``None`` before the first launch."""
        k = bisect.bisect_right(self._launch, t) - 1
        return self._done[k] if k >= 0 else None

    def window(self, label: str, ts: float, end: float) -> Optional[tuple[float, float]]:
        """The device's step: its ``ProfilerStep`` annotation on the device, else the
        activities launched within the host's ``[ts, end)``; ``None`` if there are none."""
        if label in self._steps:
            return self._steps[label]
        lo = bisect.bisect_left(self._every_launch, ts)
        hi = bisect.bisect_left(self._every_launch, end)
        if lo >= hi:
            return None
        chunk = self._every[lo:hi]
        return min(a for _, a, _ in chunk), max(b for _, _, b in chunk)


    def compute_spans(self, ts: float, end: float) -> list[tuple[float, float]]:
        """The device spans of the compute kernels (not collectives, copies or sets)
        launched within the host's ``[ts, end)``."""
        lo = bisect.bisect_left(self._kernel_launch, ts)
        hi = bisect.bisect_left(self._kernel_launch, end)
        return [(a, b) for _, a, b in self._kernels[lo:hi]]


class StepClock(NamedTuple):
    """One step's clock: ms from the step's start, on the device where it did the work.

    ``origin``/``end`` are the step's start and end in us (the device's on a GPU trace);
    ``device`` is the trace's :class:`DeviceClock`, ``None`` for host time; ``host`` is
    the host's step, ``(ts, end)`` in us.
    """

    origin: float
    end: float
    device: Optional[DeviceClock]
    host: tuple[float, float]

    @property
    def on_device(self) -> bool:
        return self.device is not None

    def ms(self, t: float) -> float:
        """A host time as ms from the step's start: when the device had done the work the
        host had launched by then (device clock), else as recorded."""
        if self.device is None:
            return (t - self.origin) / 1000.0
        done = self.device.at(t)
        return max(done - self.origin, 0.0) / 1000.0 if done is not None else 0.0

    def span_ms(self, ts: float, dur: float) -> tuple[float, float]:
        """A host op's ``(start_ms, dur_ms)`` on this clock (it began at ``ts`` and lasted
        ``dur`` us on the host)."""
        if self.device is None:
            return (ts - self.origin) / 1000.0, dur / 1000.0
        start = self.ms(ts)
        return start, max(self.ms(ts + dur) - start, 0.0)

    def recorded_ms(self, t: float) -> float:
        """A time the trace recorded on this clock (a kernel's on the device) as ms."""
        return (t - self.origin) / 1000.0

    def compute_ms(self) -> Optional[list[tuple[float, float]]]:
        """The step's compute kernels as ms spans on the device; ``None`` on the host."""
        if self.device is None:
            return None
        return [((a - self.origin) / 1000.0, (b - self.origin) / 1000.0)
                for a, b in self.device.compute_spans(*self.host)]


def step_clock(device: Optional[DeviceClock], label: str, ts: float, end: float) -> StepClock:
    """The clock of the host step ``[ts, end)``: the device's where the step launched work
    on it, else the host's."""
    if device is not None and device.activities:
        window = device.window(label, ts, end)
        if window is not None:
            return StepClock(window[0], window[1], device, (ts, end))
    return StepClock(ts, end, None, (ts, end))
