"""A profiler trace's host threads and steps: the events of each thread nested by time.

Events of one thread nest (a ``cpu_op`` inside a ``user_annotation`` inside a
``ProfilerStep#N``); :class:`Thread` keeps each event's enclosing event, and the steps are
the ``ProfilerStep#N`` annotations (the whole trace when there are none).
"""

from __future__ import annotations

import bisect
from typing import Any, Optional

from ..errors import TraceFormatError
from .kineto_events import Event

__all__ = ["Thread", "Step", "find_steps", "in_window", "backward_window", "ancestor_indices",
           "EVALUATE", "ACCUMULATE", "STEP_PREFIX"]

EVALUATE = "autograd::engine::evaluate_function: "
ACCUMULATE = "torch::autograd::AccumulateGrad"
STEP_PREFIX = "ProfilerStep#"


class Thread:
    """One thread's events in time order, each with the index of its enclosing event."""

    def __init__(self, events: list[Event]):
        events.sort(key=lambda e: (e.ts, -e.dur, e.line))
        self.events = events
        self.starts = [e.ts for e in events]
        self.parent = [-1] * len(events)
        stack: list[int] = []
        for i, e in enumerate(events):
            while stack and e.ts >= events[stack[-1]].end:
                stack.pop()
            if stack:
                self.parent[i] = stack[-1]
            stack.append(i)

    def ancestors(self, i: int):
        i = self.parent[i]
        while i >= 0:
            yield self.events[i]
            i = self.parent[i]

    def within(self, start: float, end: float) -> range:
        return range(bisect.bisect_left(self.starts, start), bisect.bisect_left(self.starts, end))


class Step:
    def __init__(self, label: str, index: Optional[int], ts: float, end: float, tid: Any):
        self.label, self.index, self.ts, self.end, self.tid = label, index, ts, end, tid


def find_steps(path: str, threads: dict[Any, Thread]) -> list[Step]:
    steps = []
    for tid, thread in threads.items():
        for e in thread.events:
            if e.cat == "user_annotation" and e.name.startswith(STEP_PREFIX):
                number = e.name[len(STEP_PREFIX):]
                index = int(number) if number.isascii() and number.isdigit() and len(number) <= 18 else None
                steps.append(Step(e.name, index, e.ts, e.end, tid))
    steps.sort(key=lambda s: s.ts)
    if steps:
        return steps
    every = [e for t in threads.values() for e in t.events]
    if not every:
        raise TraceFormatError("the trace holds no host events (cpu_op, "
                               "user_annotation); profile with ProfilerActivity.CPU", path=path, line=1)
    forwards = sum(1 for e in every if e.name == "DistributedDataParallel.forward")
    if forwards > 1:
        raise TraceFormatError(f"the trace holds {forwards} forward passes but no "
                               "ProfilerStep markers; profile with a schedule and call "
                               "prof.step() after each iteration", path=path)
    main = max(threads, key=lambda tid: len(threads[tid].events))
    return [Step("the whole trace", None, min(e.ts for e in every),
                  max(e.end for e in every), main)]


def in_window(threads: dict[Any, Thread], step: Step):
    """(thread, index) of every host event that starts within the step."""
    for thread in threads.values():
        for i in thread.within(step.ts, step.end):
            yield thread, i


def backward_window(threads, step) -> Optional[tuple[float, float]]:
    spans = [t.events[i] for t, i in in_window(threads, step)
             if t.events[i].name.startswith(EVALUATE)]
    if not spans:
        return None
    return min(e.ts for e in spans), max(e.end for e in spans)


def ancestor_indices(thread: Thread, i: int):
    i = thread.parent[i]
    while i >= 0:
        yield i
        i = thread.parent[i]
