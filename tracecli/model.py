"""The Trace: one training step as a typed networkx graph.

Op nodes and tensor nodes, each carrying a frozen dataclass under the node attribute
``data``. Edges carry an :class:`EdgeKind`:

- ``DATA``: op -> tensor it produces, tensor -> op that consumes it (forward ops, and the
  forward arrays a backward op retains);
- ``GRADIENT``: backward/gradient op -> tensor whose gradient it produces;
- ``BACKWARD_OF``: backward op -> the forward op it differentiates;
- ``HANDOFF``, ``ALLREDUCE``, ``UPDATE``: the inferred chain of an op list,
  parameter -> all-reduce input -> all-reduce output -> update op.

A backward op that both reads a forward array and produces its gradient gives a 2-cycle,
so the whole graph is not a DAG; its forward part is (the Chainer parser checks that).

This is the only module that knows networkx. Kinds follow the Chakra execution-trace
schema's vocabulary (``NodeType``, ``CollectiveCommType``) where one exists.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, fields
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import networkx as nx

__all__ = [
    "NodeType",
    "OpKind",
    "TensorKind",
    "EdgeKind",
    "Op",
    "Tensor",
    "Link",
    "TraceGraph",
    "Trace",
    "DTYPE_BYTES",
]

DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "half": 2, "float": 4,
    "double": 8, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2,
    "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
}


class NodeType(str, enum.Enum):
    """What a graph node is (Chakra: ``NodeType``, reduced to what a step trace holds)."""

    OP = "op"
    TENSOR = "tensor"


class OpKind(str, enum.Enum):
    """The role of an op in the step."""

    SETUP = "setup"  # constants, layout rewrites, shape ops, variable reads
    FORWARD = "forward"
    BACKWARD = "backward"
    GRADIENT = "gradient"  # a backward op that produces a parameter gradient
    ALLREDUCE_INPUT = "allreduce_input"  # the gradient handed to the collective library
    ALLREDUCE = "allreduce"  # the collective itself (Chakra ALL_REDUCE)
    ALLREDUCE_OUTPUT = "allreduce_output"  # the reduced gradient is available
    UPDATE = "update"  # optimizer step of one variable
    BROADCAST = "broadcast"  # initial variable broadcast (Chakra BROADCAST)
    OTHER = "other"

    @property
    def is_backward(self) -> bool:
        return self in (OpKind.BACKWARD, OpKind.GRADIENT)


class TensorKind(str, enum.Enum):
    PARAMETER = "parameter"
    INPUT = "input"  # a named input of the step: data, labels
    ACTIVATION = "activation"  # anonymous arrays: activations and temporaries


class EdgeKind(str, enum.Enum):
    DATA = "data"
    GRADIENT = "gradient"
    BACKWARD_OF = "backward_of"
    HANDOFF = "handoff"
    ALLREDUCE = "allreduce"
    UPDATE = "update"


@dataclass(frozen=True, slots=True)
class Op:
    """One executed op.

    ``position`` is its place in the file (op records or schedule lines, from 0);
    ``inputs``/``outputs`` keep the exact order and repeats of the record (a backward op
    lists the tensors whose gradients it produces as outputs); ``partner`` is the forward
    op of a backward op; ``index`` is the trainable-variable index an op list names
    (Horovod's ``cond_N``, the optimizer's ``update_N``).
    """

    id: str
    kind: OpKind
    name: str
    line: int
    position: int
    layer: Optional[str] = None
    rank: Optional[int] = None
    attrs: Optional[Mapping[str, Any]] = None
    inputs: tuple[str, ...] = ()
    input_roles: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    partner: Optional[str] = None
    index: Optional[int] = None


@dataclass(frozen=True, slots=True)
class Tensor:
    """One array of the step. ``nbytes`` is ``None`` where the trace does not say."""

    id: str
    kind: TensorKind
    name: str
    nbytes: Optional[int]
    line: Optional[int] = None
    layer: Optional[str] = None
    dtype: Optional[str] = None
    shape: Optional[tuple[int, ...]] = None
    index: Optional[int] = None

    @property
    def elements(self) -> Optional[int]:
        """Element count from the shape, else from bytes and dtype; ``None`` if unknown."""
        if self.shape is not None:
            n = 1
            for d in self.shape:
                n *= d
            return n
        if self.nbytes is not None and self.dtype in DTYPE_BYTES:
            return self.nbytes // DTYPE_BYTES[self.dtype]
        return None


@dataclass(frozen=True, slots=True)
class Link:
    """An inferred edge between two nodes that op records do not spell out."""

    source: str
    target: str
    kind: EdgeKind


class TraceGraph(nx.DiGraph):
    """A ``networkx.DiGraph`` whose nodes carry :class:`Op` or :class:`Tensor` data."""


class Trace:
    """A parsed step trace: the graph plus where it came from.

    Build one with :meth:`Trace.build`; read it through the methods here so analyses never
    depend on networkx.

    >>> ops = [Op("op0", OpKind.FORWARD, "ReLU", line=3, position=0, inputs=("t0",),
    ...           outputs=("t1",))]
    >>> tensors = [Tensor("t0", TensorKind.INPUT, "0", 16), Tensor("t1", TensorKind.ACTIVATION, "_", 16)]
    >>> trace = Trace.build("x.txt", "chainer", ops, tensors)
    >>> trace.creator("t1").name, trace.consumers("t0")[0].id
    ('ReLU', 'op0')
    """

    def __init__(
        self,
        path: str,
        format: str,
        graph: TraceGraph,
        ops: Sequence[Op],
        tensors: Sequence[Tensor],
        meta: Optional[Mapping[str, Any]] = None,
    ):
        self.path = path
        self.format = format
        self.graph = graph
        self._ops = list(ops)
        self._tensors = list(tensors)
        self.meta = dict(meta or {})
        self._op_by_id = {op.id: op for op in self._ops}
        self._tensor_by_id = {t.id: t for t in self._tensors}

    # -- construction -----------------------------------------------------------------

    @classmethod
    def build(
        cls,
        path: str,
        format: str,
        ops: Iterable[Op],
        tensors: Iterable[Tensor],
        links: Iterable[Link] = (),
        meta: Optional[Mapping[str, Any]] = None,
    ) -> "Trace":
        """Make the graph from ops, tensors and inferred links.

        Edges of an op follow from its record: a forward op reads its inputs and writes its
        outputs (``DATA``); a backward op reads its inputs (``DATA``), produces the
        gradients of its outputs (``GRADIENT``) and points at its ``partner``
        (``BACKWARD_OF``).
        """
        ops = list(ops)
        tensors = list(tensors)
        graph = TraceGraph()
        graph.add_nodes_from((t.id, {"type": NodeType.TENSOR, "data": t}) for t in tensors)
        graph.add_nodes_from((op.id, {"type": NodeType.OP, "data": op}) for op in ops)
        data, gradient = EdgeKind.DATA, EdgeKind.GRADIENT
        edges = []
        for op in ops:
            for i, tid in enumerate(op.inputs):
                edges.append((tid, op.id, {"kind": data, "index": i}))
            out_kind = gradient if op.kind.is_backward else data
            for i, tid in enumerate(op.outputs):
                edges.append((op.id, tid, {"kind": out_kind, "index": i}))
            if op.partner is not None:
                edges.append((op.id, op.partner, {"kind": EdgeKind.BACKWARD_OF}))
        edges.extend((link.source, link.target, {"kind": link.kind}) for link in links)
        # add_edges_from keeps the first record of a repeated pair in the later update;
        # reverse so the lowest input index wins, which the exact order in Op keeps anyway.
        graph.add_edges_from(reversed(edges))
        return cls(path, format, graph, ops, tensors, meta)

    # -- reading ----------------------------------------------------------------------

    def ops(self) -> list[Op]:
        """All ops in file order."""
        return self._ops

    def tensors(self) -> list[Tensor]:
        """All tensors in file (or variable) order."""
        return self._tensors

    def op(self, op_id: str) -> Op:
        return self._op_by_id[op_id]

    def tensor(self, tensor_id: str) -> Tensor:
        return self._tensor_by_id[tensor_id]

    def parameters(self) -> list[Tensor]:
        """Parameter tensors in file order (op lists: trainable-variable order)."""
        return [t for t in self._tensors if t.kind is TensorKind.PARAMETER]

    def ops_of_kind(self, *kinds: OpKind) -> list[Op]:
        wanted = set(kinds)
        return [op for op in self._ops if op.kind in wanted]

    def _neighbours(self, node: str, kind: EdgeKind, forward: bool) -> Iterator[str]:
        adj = self.graph.succ[node] if forward else self.graph.pred[node]
        for other, attrs in adj.items():
            if attrs["kind"] is kind:
                yield other

    def creator(self, tensor_id: str) -> Optional[Op]:
        """The forward op that produced ``tensor_id``, or ``None`` for a leaf."""
        for op_id in self._neighbours(tensor_id, EdgeKind.DATA, forward=False):
            op = self._op_by_id[op_id]
            if op.kind is OpKind.FORWARD:
                return op
        return None

    def consumers(self, tensor_id: str) -> list[Op]:
        """Ops that read ``tensor_id``, in file order."""
        ops = [self._op_by_id[o] for o in self._neighbours(tensor_id, EdgeKind.DATA, True)]
        return sorted(ops, key=lambda op: op.position)

    def gradient_producers(self, tensor_id: str) -> list[Op]:
        """Ops that produce a gradient of ``tensor_id``, in file order."""
        ops = [self._op_by_id[o] for o in self._neighbours(tensor_id, EdgeKind.GRADIENT, False)]
        return sorted(ops, key=lambda op: op.position)

    def backward_ops_of(self, forward_id: str) -> list[Op]:
        ops = [self._op_by_id[o] for o in self._neighbours(forward_id, EdgeKind.BACKWARD_OF, False)]
        return sorted(ops, key=lambda op: op.position)

    def linked(self, node: str, kind: EdgeKind) -> list[str]:
        """Targets of ``node``'s outgoing edges of ``kind``."""
        return sorted(self._neighbours(node, kind, True))

    def find_forward_cycle(self) -> Optional[list[str]]:
        """Op ids of one cycle among forward ops, or ``None``."""
        graph = nx.DiGraph()
        for op in self._ops:
            if op.kind is OpKind.FORWARD:
                for tid in op.inputs:
                    creator = self.creator(tid)
                    if creator is not None:
                        graph.add_edge(creator.id, op.id)
        try:
            cycle = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            return None
        return [u for u, _ in cycle]

    def counts(self) -> dict[str, int]:
        """Ops by kind, in the order of :class:`OpKind`."""
        counts = {kind.value: 0 for kind in OpKind}
        for op in self._ops:
            counts[op.kind.value] += 1
        return {k: v for k, v in counts.items() if v}

    # -- export -----------------------------------------------------------------------

    def node_link(self) -> dict[str, Any]:
        """networkx node-link data (``nx.node_link_graph`` reads it back), JSON-ready."""
        nodes = []
        for node, attrs in self.graph.nodes(data=True):
            entry = {"id": node, "type": attrs["type"].value}
            entry.update(_plain(attrs["data"]))
            nodes.append(entry)
        links = []
        for u, v, attrs in self.graph.edges(data=True):
            entry = {"source": u, "target": v, "kind": attrs["kind"].value}
            if "index" in attrs:
                entry["index"] = attrs["index"]
            links.append(entry)
        return {
            "directed": True,
            "multigraph": False,
            "graph": {"path": self.path, "format": self.format, **_jsonable(self.meta)},
            "nodes": nodes,
            "links": links,
        }

    def write_graphml(self, out) -> None:
        """Write GraphML; nested attributes (op attributes, input lists) as JSON strings."""
        flat = nx.DiGraph()
        flat.graph.update({"path": self.path, "format": self.format})
        for node, attrs in self.graph.nodes(data=True):
            values = {"type": attrs["type"].value}
            for key, value in _plain(attrs["data"]).items():
                if value is None:
                    continue
                values[key] = json.dumps(value) if isinstance(value, (list, dict)) else value
            flat.add_node(node, **values)
        for u, v, attrs in self.graph.edges(data=True):
            flat.add_edge(u, v, kind=attrs["kind"].value, **(
                {"index": attrs["index"]} if "index" in attrs else {}))
        nx.write_graphml(flat, out)


def _plain(obj: Any) -> dict[str, Any]:
    return {f.name: _jsonable(getattr(obj, f.name)) for f in fields(obj) if f.name != "id"}


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value
