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
from typing import Any, Optional

from ..model import DTYPE_BYTES, Collective, CollectiveKind, Op, Purpose
from .kineto_events import Event, KinetoEvents, torch_dtype
from .kineto_threads import Step, Thread, ancestor_indices, backward_window

__all__ = ["collective_kind", "kernel_kind", "Launch", "launches", "pair_runs", "collectives",
           "launched_by"]

_INTEGER_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8", "bool"})


def collective_kind(name: str) -> Optional[CollectiveKind]:
    """The kind a launch or execution names; ``None`` for what is not a collective.

    >>> collective_kind("c10d::allreduce_"), collective_kind("_allgather_base")
    (<CollectiveKind.ALL_REDUCE: 'allreduce'>, <CollectiveKind.ALL_GATHER: 'allgather'>)
    >>> collective_kind("gloo:all_reduce"), collective_kind("wait")
    (<CollectiveKind.ALL_REDUCE: 'allreduce'>, None)
    """
    base = name.split("::")[-1].split(":")[-1].lower().strip("_")
    for noise in ("_coalesced", "_base", "_into_tensor", "_tensor"):
        base = base.replace(noise, "")
    base = base.strip("_").replace("all_reduce", "allreduce").replace("all_gather", "allgather")
    base = base.replace("all_to_all", "alltoall")
    kinds = {"allreduce": CollectiveKind.ALL_REDUCE, "broadcast": CollectiveKind.BROADCAST,
             "allgather": CollectiveKind.ALL_GATHER, "reduce_scatter": CollectiveKind.REDUCE_SCATTER,
             "alltoall": CollectiveKind.ALL_TO_ALL, "reduce": CollectiveKind.REDUCE,
             "gather": CollectiveKind.GATHER, "scatter": CollectiveKind.SCATTER,
             "barrier": CollectiveKind.BARRIER}
    if base in kinds:
        return kinds[base]
    if base in ("send", "recv", "recv_any_source", "sendrecv"):
        return CollectiveKind.OTHER
    return None


def kernel_kind(name: str) -> Optional[CollectiveKind]:
    for token, kind in (("AllReduce", CollectiveKind.ALL_REDUCE), ("Broadcast", CollectiveKind.BROADCAST),
                        ("AllGather", CollectiveKind.ALL_GATHER),
                        ("ReduceScatter", CollectiveKind.REDUCE_SCATTER),
                        ("SendRecv", CollectiveKind.ALL_TO_ALL), ("Reduce", CollectiveKind.REDUCE)):
        if token in name:
            return kind
    return None


class Launch:
    """A collective the host issued, and where it ran once paired."""

    def __init__(self, thread: Thread, i: int, kind: CollectiveKind):
        e = thread.events[i]
        self.thread, self.i, self.event, self.kind = thread, i, e, kind
        self.elements: Optional[int] = None
        self.dtype: Optional[str] = None
        self.group_size: Optional[int] = None
        args = e.args or {}
        if "Collective name" in args:
            self.elements = args.get("In msg nelems")
            self.dtype = torch_dtype(args.get("dtype"))
            self.group_size = args.get("Group size")
        else:  # a reduce-scatter's size is its whole input, its second argument; so is a
            # list all-gather's (c10d::allgather_(outputs, inputs): the outputs go unrecorded)
            second = kind is CollectiveKind.REDUCE_SCATTER or e.name == "c10d::allgather_"
            self.elements, self.dtype = sized(args, 1 if second else 0)
        if self.elements is None or self.dtype is None:  # pre-2.2: on an op inside it
            for j in range(i + 1, len(thread.events)):
                inner = thread.events[j]
                if inner.ts >= e.end:
                    break
                if inner.name.startswith("nccl:") or inner.name == "record_param_comms":
                    elements, dtype = sized(inner.args or {})
                    self.elements = self.elements if self.elements is not None else elements
                    self.dtype = self.dtype or dtype
        self.run: Optional[Event] = None


def sized(args: dict, k: int = 0) -> tuple[Optional[int], Optional[str]]:
    """Elements and dtype of a launch's ``k``-th argument (the first; a reduce-scatter's
    input, the second: ``c10d::_reduce_scatter_base_(output, input)``) from ``Input
    Dims``/``Input type``: one tensor (``[[394241]]``, ``['float']``) or a ``TensorList``
    (``[[[a], [b]]]``, the coalesced calls, whose dtype the list does not say). Dims were
    checked when read."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not (isinstance(dims, list) and len(dims) > k and isinstance(dims[k], list) and dims[k]):
        return None, None
    first = dims[k]
    if all(isinstance(t, list) for t in first):
        return sum(math.prod(t) for t in first), None
    if all(isinstance(d, int) for d in first):
        dtype = torch_dtype(types[k]) if isinstance(types, list) and len(types) > k else None
        return math.prod(first), dtype
    return None, None


def _kernel_dtype(name: str) -> Optional[str]:
    """The dtype an NCCL kernel's name ends with (``ncclKernel_AllReduce_RING_LL_Sum_float``).

    >>> _kernel_dtype("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)")
    'float32'
    """
    base = name.split("(", 1)[0]
    suffix = base.rsplit("_", 1)[-1] if "_" in base else ""
    return _KERNEL_DTYPES.get(suffix)


_KERNEL_DTYPES = {"float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16",
                  "int8_t": "int8", "uint8_t": "uint8", "int32_t": "int32", "uint32_t": "uint32",
                  "int64_t": "int64", "uint64_t": "uint64", "i8": "int8", "u8": "uint8",
                  "i32": "int32", "i64": "int64", "f16": "float16", "f32": "float32",
                  "f64": "float64"}


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
    """Where each launched collective ran: its NCCL kernel, or gloo's worker annotation."""
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
    paired = {id(l.run) for l in launches if l.run is not None}
    leftover = [k for k in ev.kernels if id(k) not in paired]
    gloo = [t.events[i] for t in threads.values() for i in range(len(t.events))
            if t.events[i].name.startswith("gloo:") and t.events[i].cat == "user_annotation"]
    gloo.sort(key=lambda e: (e.ts, e.line))
    # The rest in order: the k-th unpaired launch of a kind and size ran as the k-th
    # execution of that kind and size (collective libraries run a group's work in order).
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
    for l in launches:
        if l.run is not None:
            continue
        keys = [(l.kind, l.elements), (l.kind, None)]
        if l.kind is CollectiveKind.ALL_GATHER and l.event.name == "c10d::_allgather_base_":
            share = sized(l.event.args or {}, 1)[0]  # gloo's annotation names the input
            if share is not None:
                keys.insert(1, (l.kind, share))
        if l.kind is CollectiveKind.REDUCE_SCATTER:  # gloo runs one as an all-reduce of the
            keys.append((CollectiveKind.ALL_REDUCE, l.elements))  # whole input (gloo:all_reduce)
        for key in keys:
            q = queues.get(key)
            while q and q[0].ts < l.event.ts - 1.0:  # ran before this launch: not its run
                q.popleft()
            if q:
                l.run = q.popleft()
                break
        if l.run is not None and l.run.cat == "user_annotation":
            args = l.run.args or {}
            if l.dtype is None and isinstance(args.get("Input type"), list) and args["Input type"]:
                l.dtype = torch_dtype(args["Input type"][0])
            if l.elements is None:
                dims = args.get("Input Dims")
                if isinstance(dims, list) and dims and isinstance(dims[0], list):
                    l.elements = math.prod(dims[0])
        elif l.run is not None:
            args = l.run.args or {}
            if l.dtype is None:
                l.dtype = torch_dtype(args.get("dtype")) or _kernel_dtype(l.run.name)
            if l.elements is None and isinstance(args.get("In msg nelems"), int):
                l.elements = args["In msg nelems"]


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


def collectives(launches: list[Launch], steps: list[Step], threads) -> list[Collective]:
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
        t0 = step.ts

        def rel(x: Optional[float]) -> Optional[float]:
            return None if x is None else (x - t0) / 1000.0

        nbytes = None
        if l.elements is not None and l.dtype is not None:
            nbytes = l.elements * DTYPE_BYTES[l.dtype]
        result.append(Collective(
            f"c{len(result)}", l.kind, step.index, l.elements, l.dtype, nbytes,
            rel(l.event.ts), rel(l.run.ts if l.run else None), rel(l.run.end if l.run else None),
            purpose(l, windows[id(step)], k not in during), l.group_size,
            lane=None if l.run is None else str(l.run.tid)))
    return result


def launched_by(collectives: list[Collective], ops: list[Op], step: Step) -> list[Collective]:
    """The op during or right after which each of the step's collectives was launched."""
    starts = [op.start_ms for op in ops]
    result = []
    for c in collectives:
        if c.step == step.index and ops:
            k = bisect.bisect_right(starts, c.launch_ms) - 1
            if k >= 0:
                c = c._replace(op=ops[k].id)
        result.append(c)
    return result
