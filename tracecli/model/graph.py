"""The networkx graph of a trace (:class:`TraceGraph`), and graph algorithms over its records.

:func:`graph_of` builds the graph from the records: the edges each op's record implies
(:func:`op_edges`), then the trace's inferred edges, the same lists the exports stream. A
library user gets it in one call: ``tracecli.load_trace(path).graph``.

The analyses (readiness, the Chainer backward/forward pairing, sizes, shapes) read the
records, through plain-dict indexes (:class:`~tracecli.model.Trace`), and the graph is
built on first use of ``Trace.graph``, because building it in ``inspect``'s main path
takes ``inspect --json`` past its target of 3 s. Measured with ``benchmarks/parse_scale.py``
(2 shared cores, best of 3, issue 22 item 7): on the 100,000-op Chainer dump 2.4 s
without the graph, 3.2 s with it built as the trace is loaded (3.6 s with networkx's
``add_edges_from``), and 4.0 s when the pairing and the autograd replay also read the
graph's adjacency instead of the records (each relation a scan of a node's edges where a
record holds a tuple); on the 500,000-line op list 2.8 s without, 4.8 s with it. The
``+graph`` rows of ``parse_scale.py`` measure it again (``docs/trace-graph.md`` has the
table); the tests check that the records' pairing and replay agree with the graph
(``tests/model/test_graph_build.py``).

networkx costs a tenth of a second to import, so it is imported when the first graph is
built. This module is the only place that knows networkx.

>>> relu = Op("op0", OpKind.FORWARD, "ReLU", 3, 0, inputs=("t0",), outputs=("t1",))
>>> [(u, v, attrs["kind"].value) for u, v, attrs in op_edges([relu])]
[('t0', 'op0', 'data'), ('op0', 't1', 'data')]
>>> graph = graph_of([], [relu])
>>> type(graph).__name__, list(graph.successors("t0")), graph.nodes["op0"]["data"].name
('TraceGraph', ['op0'], 'ReLU')
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence

from .kinds import BACKWARD_KINDS, EdgeKind, NodeType, OpKind
from .records import Op, ParamMeta

__all__ = [
    "TraceGraph",
    "graph_of",
    "op_edges",
    "find_forward_cycle",
    "generations_rise",
    "node_entry",
    "edge_entry",
    "plain",
    "jsonable",
]


if TYPE_CHECKING:  # what the class made on first use is, for type checkers and linters
    import networkx as nx

    class TraceGraph(nx.DiGraph):
        ...


def __getattr__(name: str):
    """``TraceGraph`` is made on first use (networkx is imported then)."""
    if name == "TraceGraph":
        return _graph_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_GRAPH_CLASS = None
_DATA, _GRADIENT, _BACKWARD_OF = EdgeKind.DATA, EdgeKind.GRADIENT, EdgeKind.BACKWARD_OF


def _graph_class():
    global _GRAPH_CLASS
    if _GRAPH_CLASS is None:
        import networkx as nx

        class TraceGraph(nx.DiGraph):
            """A ``networkx.DiGraph`` of a trace: each node carries its ``type``
            (:class:`NodeType`) and its record (:class:`Op`, :class:`Tensor`,
            :class:`Collective`) under ``data``; each edge its ``kind``
            (:class:`EdgeKind`) and, for an op's own edges, the ``index`` of the tensor
            in the op's record."""

        TraceGraph.__module__ = "tracecli.model"  # where pickle finds it
        TraceGraph.__qualname__ = "TraceGraph"
        _GRAPH_CLASS = TraceGraph
    return _GRAPH_CLASS


def graph_of(tensors: Iterable[Any], ops: Sequence[Op], collectives: Iterable[Any] = (),
             edges: Iterable[tuple[str, str, dict]] = (), units: Iterable[Any] = ()) -> "TraceGraph":
    """The :class:`TraceGraph` of tensor, op, collective and FSDP unit records (nodes in that order,
    each record under ``data``): the edges of each op's record (as :func:`op_edges` names
    them, in record order), then ``edges`` (``(u, v, attrs)``, each with its own ``attrs``
    dict, which the graph keeps; a pair already present takes the new attributes, an
    unknown end becomes a node without attributes, as ``add_edges_from`` does).

    The graph is networkx's own dict of dicts, filled directly and handed to the graph
    whole (networkx's views support setting ``_node``, ``_succ``, ``_pred``): the same
    graph, nodes and edges in the same order, as ``add_nodes_from``/``add_edges_from``
    build, and inserting 450,000 edges takes a quarter of their time. With the collector
    paused as well (:attr:`Trace.graph`), the graph of the 100,000-op Chainer dump takes
    0.8 s instead of 2.8 s (``benchmarks/parse_scale.py``, ``+graph s``).
    """
    node: dict[str, dict] = {}
    succ: dict[str, dict] = {}
    pred: dict[str, dict] = {}

    def add(n: str) -> None:
        node[n], succ[n], pred[n] = {}, {}, {}

    for kind, records in ((NodeType.TENSOR, tensors), (NodeType.OP, ops),
                          (NodeType.COLLECTIVE, collectives), (NodeType.UNIT, units)):
        for record in records:
            n = record.id
            node[n] = {"type": kind, "data": record}
            if n not in succ:
                succ[n], pred[n] = {}, {}
    for op in ops:
        o = op.id
        to, frm = succ[o], pred[o]
        for i, t in _first_occurrences(op.inputs):
            attrs = {"kind": _DATA, "index": i}
            if t not in succ:
                add(t)
            succ[t][o] = frm[t] = attrs
        out_kind = _GRADIENT if op.kind in BACKWARD_KINDS else _DATA
        for i, t in _first_occurrences(op.outputs):
            attrs = {"kind": out_kind, "index": i}
            if t not in succ:
                add(t)
            to[t] = pred[t][o] = attrs
        if op.partner is not None:
            if op.partner not in succ:
                add(op.partner)
            to[op.partner] = pred[op.partner][o] = {"kind": _BACKWARD_OF}
    for u, v, attrs in edges:
        for end in (u, v):
            if end not in succ:
                add(end)
        old = succ[u].get(v)
        if old is None:
            succ[u][v] = pred[v][u] = attrs
        else:
            old.update(attrs)
    graph = _graph_class()()
    graph._node, graph._succ, graph._pred = node, succ, pred
    return graph


def op_edges(ops: Iterable[Op]) -> Iterator[tuple[str, str, dict]]:
    """Edges the op records imply, in record order; a tensor listed twice by one op keeps
    its first index.

    A forward op reads its inputs and writes its outputs (``DATA``); a backward op reads
    its inputs (``DATA``), produces the gradients of its outputs (``GRADIENT``) and points
    at its ``partner`` (``BACKWARD_OF``).
    """
    data, gradient, backward_of = EdgeKind.DATA, EdgeKind.GRADIENT, EdgeKind.BACKWARD_OF
    for op in ops:
        op_id = op.id
        for i, tid in _first_occurrences(op.inputs):
            yield tid, op_id, {"kind": data, "index": i}
        out_kind = gradient if op.kind in BACKWARD_KINDS else data
        for i, tid in _first_occurrences(op.outputs):
            yield op_id, tid, {"kind": out_kind, "index": i}
        if op.partner is not None:
            yield op_id, op.partner, {"kind": backward_of}


def _first_occurrences(ids: tuple[str, ...]):
    if len(ids) < 2 or len(set(ids)) == len(ids):
        return enumerate(ids)
    seen: dict[str, int] = {}
    for i, tid in enumerate(ids):
        seen.setdefault(tid, i)
    return ((i, tid) for tid, i in seen.items())


def find_forward_cycle(ops: Iterable[Op]) -> Optional[list[str]]:
    """Op ids of one cycle among forward ops (op -> op through a tensor), or ``None``.

    Generations that rise along every edge prove there is none (Chainer's do: a function's
    generation exceeds its inputs' creators'), checked in one pass
    (:func:`generations_rise`); otherwise Kahn's algorithm over plain dicts: linear, and
    fast on 100,000-op dumps. The cycle starts at its op earliest in the file.

    >>> a = Op("op0", OpKind.FORWARD, "A", 1, 0, inputs=("t1",), outputs=("t0",))
    >>> b = Op("op1", OpKind.FORWARD, "B", 2, 1, inputs=("t0",), outputs=("t1",))
    >>> find_forward_cycle([a, b])
    ['op0', 'op1']
    >>> find_forward_cycle([a]) is None
    True
    """
    kind = OpKind.FORWARD
    forward = [op for op in ops if op.kind is kind]
    if generations_rise(forward):
        return None
    creator: dict[str, str] = {}
    for op in forward:
        for tid in op.outputs:
            creator[tid] = op.id
    preds: dict[str, list[str]] = {op.id: [] for op in forward}
    succs: dict[str, list[str]] = {op.id: [] for op in forward}
    for op in forward:
        for tid in op.inputs:
            c = creator.get(tid)
            if c is not None:
                preds[op.id].append(c)
                succs[c].append(op.id)
    indegree = {o: len(p) for o, p in preds.items()}
    ready = [o for o, d in indegree.items() if d == 0]
    while ready:
        for s in succs[ready.pop()]:
            indegree[s] -= 1
            if indegree[s] == 0:
                ready.append(s)
    stuck = {o for o, d in indegree.items() if d > 0}
    if not stuck:
        return None
    position = {op.id: op.position for op in forward}
    node = min(stuck, key=position.__getitem__)
    path: list[str] = []
    index: dict[str, int] = {}
    while node not in index:  # every stuck op has a stuck predecessor
        index[node] = len(path)
        path.append(node)
        node = next(p for p in preds[node] if p in stuck)
    return path[index[node]:]


def generations_rise(forward: list[Op]) -> bool:
    """Whether every forward op has a generation greater than those of its inputs'
    creators (a proof that the forward ops hold no cycle)."""
    generation: dict[str, int] = {}
    for op in forward:
        if op.generation is None:
            return False
        for tid in op.outputs:
            generation[tid] = op.generation
    get = generation.get
    for op in forward:
        g = op.generation
        for tid in op.inputs:
            if get(tid, -1) >= g:
                return False
    return True


def node_entry(node: str, kind: NodeType, record: NamedTuple) -> dict[str, Any]:
    """A node as plain JSON values: its id, its type and its record's fields.

    >>> from tracecli.model import Tensor, TensorKind
    >>> node_entry("t0", NodeType.TENSOR, Tensor("t0", TensorKind.INPUT, "x", 16))
    ... # doctest: +NORMALIZE_WHITESPACE
    {'id': 't0', 'type': 'tensor', 'kind': 'input', 'name': 'x', 'nbytes': 16, 'line': None,
     'layer': None, 'dtype': None, 'shape': None, 'index': None, 'sparse': False,
     'expert': False, 'shared_embedding': False}
    """
    entry = {"id": node, "type": kind.value}
    entry.update(plain(record))
    return entry


def edge_entry(u: str, v: str, attrs: dict) -> dict[str, Any]:
    """An edge as plain JSON values: its ends, its kind and its index where it has one."""
    entry = {"source": u, "target": v, "kind": attrs["kind"].value}
    if "index" in attrs:
        entry["index"] = attrs["index"]
    return entry


def plain(record: NamedTuple) -> dict[str, Any]:
    """A record's fields but its ``id``, as plain JSON values; a parameter's marks
    (:class:`~.records.ParamMeta`) as columns of their own."""
    entry = {name: jsonable(value) for name, value in zip(record._fields, record)
             if name != "id" and name != "meta"}
    meta = getattr(record, "meta", None)
    if isinstance(meta, ParamMeta):  # a tensor: its marks last, as columns
        entry.update(meta.columns())
    return entry


_SCALARS = (str, int, float, bool, type(None))


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON values: enums by value, tuples as lists, keys as text.

    >>> jsonable({1: (OpKind.FORWARD, None)})
    {'1': ['forward', None]}
    """
    if type(value) in _SCALARS:  # the common case first: exact types, no ABC checks
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value
