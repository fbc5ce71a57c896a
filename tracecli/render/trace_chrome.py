"""One trace's recorded timeline as a Chrome / Perfetto trace (``export TRACE --to chrome``).

What the trace recorded, as :func:`~.run.run_chrome_trace` draws a run's ranks: one process,
the traced step on the clock tracecli reads it on (ms from its start): the host's, or for a
GPU profiler trace the device's, where an op lasts from when the device had done the work
launched before it to when it had done its own (the trace's ``times:`` note). Its tracks:

- ``step``: the step, and the backward pass within it where the trace marks it;
- one track a host thread: the step's ops (forward, backward, gradient, optimizer) on the
  thread that ran them. A thread is known by the ops the trace links in thread order
  (``next`` links, one chain a thread); it is named by the kinds of op it ran, not by a
  thread id the model does not keep;
- one track a lane the collectives ran on (a GPU stream under NCCL, gloo's worker thread),
  each collective from its start to its end, with its size, dtype and launch in ``args``.

A trace that recorded no times (a Chainer dump, an op list) has no timeline to draw:
:func:`trace_chrome_trace` returns ``None`` for it (``plan-buckets --chrome-trace`` draws a
plan's predicted timeline instead).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional

from ..model import EdgeKind, Trace
from ..parsers.kineto_step import DEVICE_NOTE
from .chrome import chrome_trace, complete_event
from .tables import plural

__all__ = ["trace_chrome_trace", "TraceTimeline"]

PID = 0
STEP, BACKWARD, THREADS, LANES = 0, 1, 10, 1000  # track ids: step, backward, then by kind


class TraceTimeline(NamedTuple):
    """The document, and what it holds in words (for the notice that says which)."""

    doc: dict[str, Any]
    summary: str


def _threads(trace: Trace, timed: list) -> list[list]:
    """The timed ops in chains of ``next`` links (one a thread), earliest chain first."""
    parent = {op.id: op.id for op in timed}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for source, targets in trace.links_of_kind(EdgeKind.NEXT).items():
        for target in targets:
            if source in parent and target in parent:
                parent[root(source)] = root(target)
    chains: dict[str, list] = {}
    for op in timed:
        chains.setdefault(root(op.id), []).append(op)
    return sorted((sorted(c, key=lambda op: (op.start_ms, op.position)) for c in chains.values()),
                  key=lambda c: (c[0].start_ms, c[0].position))


def _lane_name(lane: Optional[str], backend: Optional[str]) -> str:
    if lane is None:
        return "collectives (lane not recorded)"
    where = {"nccl": "GPU stream", "gloo": "gloo worker thread"}.get(backend or "", "lane")
    return f"collectives on {where} {lane}"


def trace_chrome_trace(trace: Trace) -> Optional[TraceTimeline]:
    """The timeline ``trace`` recorded (see the module's docstring); ``None`` where it
    recorded no times."""
    step = trace.step
    timed = [op for op in trace.ops() if op.start_ms is not None and op.dur_ms is not None]
    ran = [c for c in trace.collectives() if c.start_ms is not None and c.end_ms is not None
           and (step is None or step.index is None or c.step == step.index)]
    if not timed and not ran:
        return None
    label = step.label if step is not None else "the step"
    processes = {PID: f"{os.path.basename(trace.path)} ({label})"}
    tracks: dict[tuple[int, int], str] = {}
    events = []
    if step is not None:
        tracks[(PID, STEP)] = "step"
        events.append(complete_event(step.label, 0.0, step.duration_ms, PID, STEP, "step"))
        if step.backward_start_ms is not None and step.backward_end_ms is not None:
            tracks[(PID, BACKWARD)] = "backward"
            events.append(complete_event("backward", step.backward_start_ms,
                                         step.backward_end_ms - step.backward_start_ms, PID,
                                         BACKWARD, "compute"))
    threads = _threads(trace, timed)
    for k, chain in enumerate(threads):
        kinds = ", ".join(dict.fromkeys(op.kind.value for op in chain))
        tracks[(PID, THREADS + k)] = f"host thread {k + 1} ({kinds})"
        for op in chain:
            events.append(complete_event(op.name, op.start_ms, op.dur_ms, PID, THREADS + k,
                                         op.kind.value, {"op": op.id, "trace line": op.line}))
    lanes: dict[Optional[str], int] = {}
    for c in ran:
        tid = lanes.setdefault(c.lane, LANES + len(lanes))
        tracks[(PID, tid)] = _lane_name(c.lane, trace.meta.backend)
        args = {"elements": c.elements, "bytes": c.nbytes, "dtype": c.dtype,
                "purpose": c.purpose.value, "launched ms": c.launch_ms}
        events.append(complete_event(c.kind.value, c.start_ms, c.end_ms - c.start_ms, PID, tid,
                                     "collective", {k: v for k, v in args.items()
                                                    if v is not None}))
    clock = "the device's clock" if DEVICE_NOTE in trace.meta.notes else "the host's clock"
    summary = (f"the timeline {trace.path} recorded ({label}, on {clock}): "
               f"{plural(len(timed), 'op')} on {plural(len(threads), 'host thread')}, "
               f"{plural(len(ran), 'collective')} on {plural(len(lanes), 'lane')}")
    return TraceTimeline(chrome_trace(events, tracks, processes), summary)
