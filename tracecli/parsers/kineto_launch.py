"""A collective as the host launched it: its kind, sizes, group and peer, from the launch's args.

Two spellings of a launch (torch 2.x):

- ``record_param_comms`` (NCCL, and every backend in torch >= 2.2 where it is recorded):
  ``Collective name``, ``In msg nelems``/``Out msg nelems``, ``dtype``, ``Group size``,
  ``Process Group Name``, ``Seq`` (torch >= 2.5), ``In split size``/``Out split size``
  (an all-to-all-v's splits, ``"[]"`` for an even one), ``Src Rank``/``Dst Rank`` (a
  point-to-point's peer);
- a ``c10d::`` op (gloo in torch 2.13 records no ``record_param_comms``): sizes from
  ``Input Dims``/``Input type``; an all-to-all-v's splits and a send's or recv's peer from
  ``Concrete Inputs`` (``c10d::alltoall_base_(output, input, ..., output_split_sizes,
  input_split_sizes, ...)``, ``c10d::send(tensors, dst, tag)``, ``c10d::recv_(tensors,
  src, tag)``).

``elements`` is always what this rank put in: an all-gather's, a reduce-scatter's and an
all-to-all's input (the second tensor of the ``c10d::`` op; ``In msg nelems``), so a
launch and the collective's execution (gloo's span records its input) agree.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from ..model import CollectiveKind
from .kineto_events import MAX_DIM, MAX_TEXT_ARG, Event, torch_dtype
from .kineto_threads import Thread

__all__ = ["Launch", "collective_kind", "kernel_kind", "kernel_dtype", "sized", "parse_splits",
           "MAX_PEER"]

MAX_PEER = 1 << 24
_INT_LIST = re.compile(r"^\[\s*(\d+(?:\s*,\s*\d+)*)?\s*\]$")
_KINDS = {"allreduce": CollectiveKind.ALL_REDUCE, "broadcast": CollectiveKind.BROADCAST,
          "allgather": CollectiveKind.ALL_GATHER, "reduce_scatter": CollectiveKind.REDUCE_SCATTER,
          "alltoall": CollectiveKind.ALL_TO_ALL, "alltoallv": CollectiveKind.ALL_TO_ALL,
          "reduce": CollectiveKind.REDUCE, "gather": CollectiveKind.GATHER,
          "scatter": CollectiveKind.SCATTER, "barrier": CollectiveKind.BARRIER,
          "send": CollectiveKind.SEND, "recv": CollectiveKind.RECV,
          "recv_any_source": CollectiveKind.RECV}
# the input tensor's position in a c10d:: op's arguments, where it is not the first
_INPUT_ARG = {CollectiveKind.ALL_GATHER: 1, CollectiveKind.REDUCE_SCATTER: 1,
              CollectiveKind.ALL_TO_ALL: 1}


def collective_kind(name: str) -> Optional[CollectiveKind]:
    """The kind a launch or execution names; ``None`` for what is not a collective.

    >>> collective_kind("c10d::allreduce_"), collective_kind("_allgather_base")
    (<CollectiveKind.ALL_REDUCE: 'allreduce'>, <CollectiveKind.ALL_GATHER: 'allgather'>)
    >>> collective_kind("gloo:all_reduce"), collective_kind("wait")
    (<CollectiveKind.ALL_REDUCE: 'allreduce'>, None)
    >>> collective_kind("c10d::alltoall_base_"), collective_kind("all_to_allv"), collective_kind("c10d::recv_")
    (<CollectiveKind.ALL_TO_ALL: 'alltoall'>, <CollectiveKind.ALL_TO_ALL: 'alltoall'>, <CollectiveKind.RECV: 'recv'>)
    """
    base = name.split("::")[-1].split(":")[-1].lower().strip("_")
    for noise in ("_coalesced", "_base", "_into_tensor", "_tensor", "_single"):
        base = base.replace(noise, "")
    base = base.strip("_").replace("all_reduce", "allreduce").replace("all_gather", "allgather")
    base = base.replace("all_to_all", "alltoall")
    if base == "sendrecv":
        return CollectiveKind.OTHER
    return _KINDS.get(base)


def kernel_kind(name: str) -> Optional[CollectiveKind]:
    for token, kind in (("AllReduce", CollectiveKind.ALL_REDUCE), ("Broadcast", CollectiveKind.BROADCAST),
                        ("AllGather", CollectiveKind.ALL_GATHER),
                        ("ReduceScatter", CollectiveKind.REDUCE_SCATTER),
                        ("SendRecv", CollectiveKind.ALL_TO_ALL), ("Reduce", CollectiveKind.REDUCE)):
        if token in name:
            return kind
    return None


def kernel_dtype(name: str) -> Optional[str]:
    """The dtype an NCCL kernel's name ends with (``ncclKernel_AllReduce_RING_LL_Sum_float``).

    >>> kernel_dtype("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)")
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


def parse_splits(text: Any) -> Optional[tuple[int, ...]]:
    """A split list as torch's profiler writes it (``"[40, 80]"``); ``None`` for no list,
    an empty one (an even all-to-all) or one that is not a list of small integers.

    >>> parse_splits("[40, 80]"), parse_splits("[]"), parse_splits("[1, x]")
    ((40, 80), None, None)
    """
    if not isinstance(text, str) or len(text) > MAX_TEXT_ARG:
        return None
    found = _INT_LIST.match(text.strip())
    if found is None or found.group(1) is None:
        return None
    values = tuple(int(v) for v in found.group(1).split(","))
    return values if all(v <= MAX_DIM for v in values) else None


def _peer(value: Any) -> Optional[int]:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 8:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_PEER:
        return value
    return None


class Launch:
    """A collective the host issued, and where it ran once paired."""

    def __init__(self, thread: Thread, i: int, kind: CollectiveKind):
        e = thread.events[i]
        self.thread, self.i, self.event, self.kind = thread, i, e, kind
        self.elements: Optional[int] = None
        self.dtype: Optional[str] = None
        self.group_size: Optional[int] = None
        self.group: Optional[str] = None
        self.seq: Optional[int] = None
        self.peer: Optional[int] = None
        self.splits: Optional[tuple[tuple[int, ...], tuple[int, ...]]] = None
        self.out_elements: Optional[int] = None
        args = e.args or {}
        if "Collective name" in args:
            self._from_comms(args)
        else:
            self._from_c10d(args)
        if self.elements is None or self.dtype is None:  # pre-2.2: on an op inside it
            self._from_inner(thread, i, e)
        self.run: Optional[Event] = None

    def _from_comms(self, args: dict) -> None:
        self.elements = args.get("In msg nelems")
        self.out_elements = args.get("Out msg nelems")
        self.dtype = torch_dtype(args.get("dtype"))
        self.group_size = args.get("Group size")
        self._group(args)
        if self.kind is CollectiveKind.ALL_TO_ALL:
            ins, outs = parse_splits(args.get("In split size")), parse_splits(args.get("Out split size"))
            if ins is not None and outs is not None:
                self.splits = (ins, outs)
        if self.kind.point_to_point:
            key = "Dst Rank" if self.kind is CollectiveKind.SEND else "Src Rank"
            self.peer = _peer(args.get(key))

    def _from_c10d(self, args: dict) -> None:
        self._group(args)
        self.elements, self.dtype = sized(args, _INPUT_ARG.get(self.kind, 0))
        if self.kind in _INPUT_ARG:
            self.out_elements = sized(args, 0)[0]
        concrete = args.get("Concrete Inputs")
        if not isinstance(concrete, list):
            return
        if self.kind is CollectiveKind.ALL_TO_ALL and len(concrete) > 4:
            outs, ins = parse_splits(concrete[3]), parse_splits(concrete[4])
            if ins is not None and outs is not None:
                self.splits = (ins, outs)
        elif self.kind.point_to_point and len(concrete) > 2:
            self.peer = _peer(concrete[2])

    def _group(self, args: dict) -> None:
        name, seq = args.get("Process Group Name"), args.get("Seq")
        if isinstance(name, str) and len(name) <= 256:
            self.group = name
        if isinstance(seq, int) and not isinstance(seq, bool):
            self.seq = seq

    def _from_inner(self, thread: Thread, i: int, e: Event) -> None:
        for j in range(i + 1, len(thread.events)):
            inner = thread.events[j]
            if inner.ts >= e.end:
                break
            if inner.name.startswith("nccl:") or inner.name == "record_param_comms":
                elements, dtype = sized(inner.args or {})
                self.elements = self.elements if self.elements is not None else elements
                self.dtype = self.dtype or dtype
                if self.group is None:
                    self._group(inner.args or {})
