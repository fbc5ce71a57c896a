"""The collectives of a profiler trace: what the host launched, and where each one ran.

Every collective the run issued, in every profiled step, becomes a :class:`Collective`:
kind, elements, dtype, when the host launched it and when it ran (the NCCL kernel, found
via its launch's correlation id; the ``gloo:*`` annotation of gloo's worker thread), and
its purpose (``gradients`` during backward, ``unused-map`` for DDP's integer map of used
parameters, ``buffers`` for DDP's broadcast in forward, ``other``).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict, deque
from typing import Any, Optional, Sequence

from ..model import DTYPE_BYTES, Collective, CollectiveKind, Op, Purpose
from .kineto_device import StepClock
from .kineto_events import KinetoEvents, torch_dtype
from .kineto_launch import Launch, collective_kind, kernel_dtype, kernel_kind, sized
from .kineto_threads import Step, Thread, ancestor_indices, backward_window

__all__ = ["collective_kind", "kernel_kind", "Launch", "launches", "pair_runs", "collectives",
           "launched_by", "purpose", "record", "sized"]

_INTEGER_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8", "bool"})


def launches(threads: dict[Any, Thread]) -> list[Launch]:
    found = []
    for thread in threads.values():
        for i, e in enumerate(thread.events):
            if e.name == "record_param_comms" and e.args and "Collective name" in e.args:
                kind = collective_kind(str(e.args["Collective name"]))
                if kind is not None:
                    found.append(Launch(thread, i, kind))
            elif e.name.startswith("c10d::") and e.cat == "cpu_op":
                kind = collective_kind(e.name)
                if kind is not None:
                    found.append(Launch(thread, i, kind))
    # record_param_comms inside a c10d:: op describes the same collective: keep the inner one
    inner = {(id(l.thread), a) for l in found if l.event.name == "record_param_comms"
             for a in ancestor_indices(l.thread, l.i)}
    found = [l for l in found if (id(l.thread), l.i) not in inner]
    found.sort(key=lambda l: (l.event.ts, l.event.line))
    return found


def pair_runs(launches: list[Launch], ev: KinetoEvents, threads: dict[Any, Thread]) -> None:
    """Where each launched collective ran: its NCCL kernel (by correlation id), or gloo's
    worker annotation (``gloo:*``; a send's or recv's on the launching thread itself)."""
    by_place: dict[Any, list[Launch]] = defaultdict(list)
    for l in launches:
        by_place[l.event.tid].append(l)
    for kernel in ev.kernels:
        corr = (kernel.args or {}).get("correlation")
        where = ev.launches.get(corr) if corr is not None else None
        if where is None:
            continue
        tid, ts = where
        for l in by_place.get(tid, ()):
            if l.event.ts <= ts <= l.event.end and l.run is None:
                l.run = kernel
                break
    queues = _unpaired(launches, ev, threads)
    for l in launches:
        if l.run is None:
            _take(l, queues)
        if l.run is not None:
            _fill(l)


def _unpaired(launches: list[Launch], ev: KinetoEvents, threads) -> dict[tuple, deque]:
    """The executions no correlation id paired, queued by (kind, elements) in time order:
    the k-th unpaired launch of a kind and size ran as the k-th execution of that kind and
    size (collective libraries run a group's work in order)."""
    paired = {id(l.run) for l in launches if l.run is not None}
    leftover = [k for k in ev.kernels if id(k) not in paired]
    gloo = [t.events[i] for t in threads.values() for i in range(len(t.events))
            if t.events[i].name.startswith("gloo:") and t.events[i].cat == "user_annotation"]
    gloo.sort(key=lambda e: (e.ts, e.line))
    queues: dict[tuple, deque] = defaultdict(deque)
    for e in leftover:
        args = e.args or {}
        kind = collective_kind(str(args["Collective name"])) if "Collective name" in args \
            else kernel_kind(e.name)
        queues[(kind, args.get("In msg nelems"))].append(e)
    for e in gloo:
        dims = (e.args or {}).get("Input Dims")
        elements = None
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0] \
                and all(isinstance(d, int) for d in dims[0]):
            elements = math.prod(dims[0])
        queues[(collective_kind(e.name), elements)].append(e)
    return queues


def _take(l: Launch, queues: dict[tuple, deque]) -> None:
    keys = [(l.kind, l.elements), (l.kind, None)]
    if l.kind is CollectiveKind.REDUCE_SCATTER:  # gloo runs one as an all-reduce of the
        keys.append((CollectiveKind.ALL_REDUCE, l.elements))  # whole input (gloo:all_reduce)
    for key in keys:
        q = queues.get(key)
        while q and q[0].ts < l.event.ts - 1.0:  # ran before this launch: not its run
            q.popleft()
        if q:
            l.run = q.popleft()
            return


def _fill(l: Launch) -> None:
    """What the launch did not record, from its execution."""
    args = l.run.args or {}
    if l.run.cat == "user_annotation":
        if l.dtype is None and isinstance(args.get("Input type"), list) and args["Input type"]:
            l.dtype = torch_dtype(args["Input type"][0])
        if l.elements is None:
            dims = args.get("Input Dims")
            if isinstance(dims, list) and dims and isinstance(dims[0], list):
                l.elements = math.prod(dims[0])
        return
    if l.dtype is None:
        l.dtype = torch_dtype(args.get("dtype")) or kernel_dtype(l.run.name)
    if l.elements is None and isinstance(args.get("In msg nelems"), int):
        l.elements = args["In msg nelems"]
    if l.group is None and isinstance(args.get("Process Group Name"), str):
        l.group = args["Process Group Name"][:256]
    if l.seq is None and isinstance(args.get("Seq"), int):
        l.seq = args["Seq"]


_REDUCTIONS = (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER)


def purpose(l: Launch, backward: Optional[tuple[float, float]], after: bool = False) -> Purpose:
    """``after``: the step reduced no gradient during backward, so its float reductions
    after backward are its gradients' (Megatron-Core without ``overlap_grad_reduce``:
    ``finish_grad_sync``)."""
    ts = l.event.ts
    if backward is not None and l.kind is CollectiveKind.BROADCAST and ts < backward[0]:
        return Purpose.BUFFERS
    if backward is not None and l.kind in _REDUCTIONS and backward[0] <= ts <= backward[1]:
        return Purpose.UNUSED_MAP if l.dtype in _INTEGER_DTYPES else Purpose.GRADIENTS
    if after and backward is not None and l.kind in _REDUCTIONS and ts > backward[1] \
            and l.dtype not in _INTEGER_DTYPES:
        return Purpose.GRADIENTS
    return Purpose.OTHER


def collectives(launches: list[Launch], steps: list[Step], threads,
                clocks: Sequence[StepClock], launched: Optional[list] = None) -> list[Collective]:
    """Every collective launched within a profiled step, timed on that step's clock
    (``clocks[k]`` is ``steps[k]``'s); ``launched`` receives each one's launch in ms from
    its host step's start."""
    result = []
    starts = [s.ts for s in steps]
    windows = {id(s): backward_window(threads, s) for s in steps}
    during: set[int] = set()  # steps that reduced gradients during backward
    for l in launches:
        k = bisect.bisect_right(starts, l.event.ts) - 1
        if k >= 0 and purpose(l, windows[id(steps[k])]) is Purpose.GRADIENTS:
            during.add(k)
    for l in launches:
        k = bisect.bisect_right(starts, l.event.ts) - 1
        if k < 0 or l.event.ts >= steps[k].end:
            continue  # outside every step (DDP's construction-time broadcast, ...)
        step = steps[k]
        why = purpose(l, windows[id(step)], k not in during)
        result.append(record(l, f"c{len(result)}", step.index, why, clocks[k]))
        if launched is not None:
            launched.append((l.event.ts - step.ts) / 1000.0)
    return result


def record(l: Launch, cid: str, step: Optional[int], why: Purpose, clock: StepClock) -> Collective:
    """The launch ``l`` as a :class:`Collective` of ``step``, on the step's ``clock``: a
    kernel's times as the device recorded them, a host span's as the host did (on a GPU
    clock, a host span is placed by what the device had done by then)."""
    run = l.run
    start = end = None
    if run is not None:
        if run.cat == "kernel" or not clock.on_device:
            start, end = clock.recorded_ms(run.ts), clock.recorded_ms(run.end)
        else:
            start, dur = clock.span_ms(run.ts, run.dur)
            end = start + dur
    nbytes = None
    if l.elements is not None and l.dtype is not None:
        nbytes = l.elements * DTYPE_BYTES[l.dtype]
    launch = clock.ms(l.event.ts)
    if clock.on_device and start is not None and launch > start:  # never after it ran
        launch = start
    return Collective(cid, l.kind, step, l.elements, l.dtype, nbytes, launch, start, end, why,
                      l.group_size, lane=None if run is None else str(run.tid), group=l.group,
                      seq=l.seq, peer=l.peer, splits=l.splits, out_elements=l.out_elements,
                      line=l.event.line)


def launched_by(collectives: list[Collective], launched_ms: Sequence[float], ops: list[Op],
                started_ms: Sequence[float], step: Step) -> list[Collective]:
    """The op during or right after which each of the step's collectives was launched, by
    the host's times (``launched_ms``, ``started_ms``: ms from the host's step start; on a
    GPU trace the records' own times are the device's, where many ops share one)."""
    result = []
    for c, at in zip(collectives, launched_ms):
        if c.step == step.index and ops:
            k = bisect.bisect_right(started_ms, at) - 1
            if k >= 0:
                c = c._replace(op=ops[k].id)
        result.append(c)
    return result
