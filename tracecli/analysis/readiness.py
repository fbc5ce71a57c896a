"""Gradient readiness: in what order parameter gradients become ready during backward.

The trace says how (:class:`~tracecli.model.ReadinessMethod`); this module never asks for
a format's name.

- Autograd replay (Chainer dumps): backward is replayed as ``chainer.Variable.backward`` runs it (a heap keyed
  by ``(-rank, discovery counter)`` from the loss's creator); a parameter is ready after the
  last backward op producing its gradient; several parameters of one op are ready together,
  in the op's output order.
- Op lists with Horovod nodes: gradient N is ready at the first line naming
  ``.../Allreduce/cond_N/``.
- Plain op lists: a variable is ready after the last op of its layer that produces its kind
  of gradient (``source="producer"``), else after the last backward op of its layer
  (``source="fallback"``); a variable the list updates but whose gradient no op of its own
  produces (an embedding's sparse gradient, built from the gradient flowing into the
  lookup) is ready when its update's inputs are: after the last backward op that ran
  before its update (``source="update"``). None is dropped that the list updates.
- Recorded backward (profiler traces): backward ops in the order they ran; a parameter is
  ready when the op that accumulated its gradient ended (``source="recorded"``).

The autograd replay walks the backward graph from the records (each forward op's inputs,
each array's creator), not from ``trace.graph``: building the networkx graph for it takes
``inspect --json`` on a 100,000-op dump from 2.4 s to 3.2 s, and reading its adjacency
instead of the records to 4.0 s, past the 3 s target (:mod:`tracecli.model.graph` has the
measurement). ``tests/model/test_graph_build.py`` replays on the graph and checks the orders agree.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import NamedTuple, Optional

from .._gc import gc_paused
from ..model import BACKWARD_KINDS, EdgeKind, Op, OpKind, ReadinessMethod, Trace, check_fields

__all__ = ["GradientReady", "LayerReady", "Readiness", "readiness", "backward_schedule"]


class GradientReady(NamedTuple):
    """One parameter gradient. ``backward_position`` counts the backward ops run when it is
    ready (1 = after the first); ``op`` is the op whose completion makes it ready."""

    tensor_id: str
    name: str
    elements: Optional[int]
    layer: Optional[str]
    nbytes: Optional[int]
    dtype: Optional[str]
    shape: Optional[tuple[int, ...]]
    ready_index: int
    backward_position: int
    source: str
    op: Optional[str]
    op_name: Optional[str]
    sparse: bool = False
    expert: bool = False  # Megatron-Core's flags, from the sizes sidecar
    shared_embedding: bool = False


class LayerReady(NamedTuple):
    name: str
    ready_index: int
    backward_position: int
    tensors: tuple[str, ...]
    nbytes: Optional[int]
    elements: Optional[int]


# Readiness makes a GradientReady a gradient and a LayerReady a layer with tuple.__new__:
# with keywords each costs ~1 us more (60 ms, an eighth of readiness, on a 66,000-gradient
# list). Their values follow these fields, checked at import:
check_fields(GradientReady, "tensor_id name elements layer nbytes dtype shape ready_index "
                            "backward_position source op op_name sparse expert shared_embedding")
check_fields(LayerReady, "name ready_index backward_position tensors nbytes elements")


@dataclass(frozen=True)
class Readiness:
    gradients: tuple[GradientReady, ...]
    layers: tuple[LayerReady, ...]
    backward_ops: tuple[str, ...]  # op ids in backward execution order
    method: str
    without_gradient: tuple[str, ...] = ()  # parameters no backward op produces

    @property
    def total_bytes(self) -> Optional[int]:
        sizes = [g.nbytes for g in self.gradients]
        return None if any(s is None for s in sizes) else sum(sizes)


def backward_schedule(trace: Trace) -> list[Op]:
    """Backward ops in execution order.

    Autograd replay: replay ``Variable.backward`` from every output no forward op consumes
    (the loss), highest rank first. Otherwise: backward ops in the trace's order.
    """
    if trace.abilities.readiness is not ReadinessMethod.AUTOGRAD_REPLAY:
        return [op for op in trace.ops() if op.kind in BACKWARD_KINDS]
    consumed: set[str] = set()
    forward = []
    creator: dict[str, Op] = {}  # first forward op writing each array, as Trace.creator
    backward_of = {}
    forward_kind, backward_kind = OpKind.FORWARD, OpKind.BACKWARD
    for op in trace.ops():
        if op.kind is forward_kind:
            forward.append(op)
            consumed.update(op.inputs)
            for tid in op.outputs:
                creator.setdefault(tid, op)
        elif op.kind is backward_kind and op.partner is not None:
            backward_of[op.partner] = op
    # The loss's creator: no forward op reads any of its outputs. (An op with one unused
    # output among used ones, like an ignored split_axis piece, is not where backward starts.)
    roots = [f for f in forward if f.id in backward_of and f.outputs
             and consumed.isdisjoint(f.outputs)]
    if not roots:
        roots = [f for f in forward if f.id in backward_of and not consumed.issuperset(f.outputs)]
    roots.sort(key=lambda f: (-f.generation, f.position))
    heap: list[tuple[int, int, str, Op]] = []
    seen: set[str] = set()
    push, pop = heapq.heappush, heapq.heappop

    for root in roots:
        if root.id not in seen:
            push(heap, (-root.generation, len(seen), root.id, root))
            seen.add(root.id)
    order = []
    get = creator.get
    while heap:
        fid, op = pop(heap)[2:]
        if fid in backward_of:
            order.append(backward_of[fid])
        for tid in op.inputs:
            c = get(tid)
            if c is not None and c.id not in seen:
                push(heap, (-c.generation, len(seen), c.id, c))
                seen.add(c.id)
    return order


def readiness(trace: Trace) -> Readiness:
    """Per-gradient and per-layer readiness order of ``trace``."""
    with gc_paused():
        return _readiness(trace)


def _readiness(trace: Trace) -> Readiness:
    schedule = backward_schedule(trace)
    how = trace.abilities.readiness
    if how is ReadinessMethod.OP_NAMES:
        rows, missing = _op_list_rows(trace, schedule)
    else:
        rows, missing = _producer_rows(trace, schedule, _PRODUCER_SOURCE[how])
    method = trace.abilities.readiness_note
    rows.sort(key=lambda r: r[0])
    new = tuple.__new__  # GradientReady(...) without its Python __new__ (fields checked below)
    gradients = tuple(
        new(GradientReady, (t.id, t.name, t.elements, t.layer, t.nbytes, t.dtype, t.shape, i, bpos,
                            source, op.id if op else None, op.name if op else None, t.sparse,
                            t.expert, t.shared_embedding))
        for i, (_, bpos, t, source, op) in enumerate(rows)
    )
    layers = _layers(gradients) or _producer_layers(trace, schedule)
    return Readiness(gradients, layers, tuple(op.id for op in schedule), method,
                     tuple(missing))


_PRODUCER_SOURCE = {ReadinessMethod.AUTOGRAD_REPLAY: "backward-op",
                    ReadinessMethod.RECORDED: "recorded"}


def _producer_rows(trace: Trace, schedule: list[Op], source: str):
    """A parameter is ready after the last backward op (in ``schedule``) producing it."""
    last: dict[str, tuple[int, Op]] = {}  # the last op in schedule producing each gradient
    for i, op in enumerate(schedule):
        for tid in op.outputs:
            last[tid] = (i, op)
    rows, missing = [], []
    for tensor in trace.parameters():
        found = last.get(tensor.id)
        if found is None:
            missing.append(tensor.name)
            continue
        i, op = found
        rows.append(((i, op.outputs.index(tensor.id)), i + 1, tensor, source, op))
    return rows, missing


def _op_list_rows(trace: Trace, backward: list[Op]):
    """``backward``: the backward ops in list order (the schedule of an op list)."""
    backward_positions = [op.position for op in backward]  # sorted: file order
    ends: dict[str, Op] = {}  # each layer's last backward op: made when first needed

    def last_of_layer() -> dict[str, Op]:
        if not ends:
            ends.update((op.layer, op) for op in backward if op.layer is not None)
        return ends

    parameters = trace.parameters()
    handoff_of = trace.links_of_kind(EdgeKind.HANDOFF)
    handoffs = [handoff_of.get(t.id) for t in parameters]
    updates = [None] * len(parameters)
    if not all(handoffs):  # the optimizer's update readies a gradient no op produces
        update_of = trace.links_of_kind(EdgeKind.UPDATE)
        updates = [update_of.get(t.id) if not h else None for t, h in zip(parameters, handoffs)]
    linked = trace.ops_by_id([h[0] for h in handoffs if h] + [u[0] for u in updates if u])
    rows, missing = [], []
    for tensor, handoff, updated in zip(parameters, handoffs, updates):
        if handoff:
            op, source = linked[handoff[0]], "horovod"
        elif producers := trace.gradient_producers(tensor.id):
            op, source = producers[-1], "producer"
        elif tensor.layer in last_of_layer():
            op, source = ends[tensor.layer], "fallback"
        elif updated:
            update = linked[updated[0]]
            ran = bisect.bisect_left(backward_positions, update.position)  # before its update
            op = backward[ran - 1] if ran else update
            rows.append(((op.position, 1, tensor.index), ran, tensor, "update", op))
            continue
        else:
            missing.append(tensor.name)
            continue
        ran = bisect.bisect_right(backward_positions, op.position)  # backward ops run by then
        rows.append(((op.position, 0, tensor.index), ran, tensor, source, op))
    return rows, missing


def _layers(gradients: tuple[GradientReady, ...]) -> tuple[LayerReady, ...]:
    groups: dict[str, list[GradientReady]] = {}
    for g in gradients:
        if g.layer is not None:
            groups.setdefault(g.layer, []).append(g)
    result = []
    new = tuple.__new__  # LayerReady(...) without its Python __new__ (fields checked below)
    for i, (name, members) in enumerate(groups.items()):
        sizes = [g.nbytes for g in members]
        nbytes = None if None in sizes else sum(sizes)
        counts = [g.elements for g in members]
        elements = None if None in counts else sum(counts)
        result.append(new(LayerReady, (name, i, members[0].backward_position,
                                       tuple([g.name for g in members]), nbytes, elements)))
    return tuple(result)


def _producer_layers(trace: Trace, schedule: list[Op]) -> tuple[LayerReady, ...]:
    """Layers in order of their first gradient-producing op (op lists without sizes)."""
    seen: dict[str, int] = {}
    for count, op in enumerate(schedule, 1):
        if op.kind is OpKind.GRADIENT and op.layer is not None and op.layer not in seen:
            seen[op.layer] = count
    return tuple(LayerReady(name, i, pos, (), None, None)
                 for i, (name, pos) in enumerate(seen.items()))

