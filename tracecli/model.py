"""The Trace: one training step as a typed networkx graph.

Op nodes and tensor nodes, each carrying its typed record (:class:`Op`, :class:`Tensor`)
under the node attribute ``data``. Edges carry an :class:`EdgeKind`:

- ``DATA``: op -> tensor it produces, tensor -> op that consumes it (forward ops, and the
  forward arrays a backward op retains);
- ``GRADIENT``: backward/gradient op -> tensor whose gradient it produces;
- ``BACKWARD_OF``: backward op -> the forward op it differentiates;
- ``HANDOFF``, ``ALLREDUCE``, ``UPDATE``: the inferred chain of an op list,
  parameter -> all-reduce input -> all-reduce output -> update op.

A backward op that both reads a forward array and produces its gradient gives a 2-cycle,
so the whole graph is not a DAG; its forward part is (the Chainer parser checks that).

The graph is built on first use of :attr:`Trace.graph`. The relations analyses need
(creator, consumers, gradient producers, links) are answered from plain-dict indexes of
the same records, so loading a 500,000-op trace and analysing it does not pay for a
networkx graph nobody asked for; exporting or ``trace.graph`` builds it once.

This is the only module that knows networkx. Kinds follow the Chakra execution-trace
schema's vocabulary (``NodeType``, ``CollectiveCommType``) where one exists.
"""

from __future__ import annotations

import enum
import math
from collections import Counter, defaultdict
from operator import attrgetter
from types import MappingProxyType
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence


__all__ = [
    "Abilities",
    "ReadinessMethod",
    "ComputeSource",
    "VariableOrder",
    "CollectiveKind",
    "Collective",
    "StepInfo",
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
    "BACKWARD_KINDS",
]

DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "half": 2, "float": 4,
    "double": 8, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2,
    "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
}


class ReadinessMethod(str, enum.Enum):
    """How the order in which gradients become ready is derived from a trace."""

    AUTOGRAD_REPLAY = "autograd-replay"  # replay the autograd engine from the loss (Chainer)
    RECORDED = "recorded"  # backward ops in recorded order; ready after the last producer
    OP_NAMES = "op-names"  # an executed op list: hand-offs, producers by name, fallbacks


class ComputeSource(str, enum.Enum):
    """Where a trace's compute times can come from."""

    ROOFLINE = "roofline"  # inferred shapes: FLOPs and bytes against a device preset
    MEASURED = "measured"  # op durations recorded in the trace
    NONE = "none"  # nothing: the user gives --backward-ms or --op-times


class VariableOrder(str, enum.Enum):
    """The model's own parameter order (tf_cnn_benchmarks groups gradients in it)."""

    FIRST_USE = "first-use"  # order of first use in forward
    INDEX = "index"  # each parameter tensor's ``index`` (trainable-variable order)


@dataclass(frozen=True)
class Abilities:
    """What a parser declares its traces can answer; analyses ask this, never the format.

    ``readiness_note`` names the readiness method in reports; ``sizes_hint`` says how to
    supply sizes the trace may lack ("" when it always carries them).
    """

    readiness: ReadinessMethod
    compute: ComputeSource
    variable_order: VariableOrder
    readiness_note: str
    infers_shapes: bool = False
    sizes_hint: str = ""


class CollectiveKind(str, enum.Enum):
    """A collective's kind (Chakra: ``CollectiveCommType``); values as the JSON shows them."""

    ALL_REDUCE = "allreduce"
    BROADCAST = "broadcast"
    ALL_GATHER = "allgather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "alltoall"
    REDUCE = "reduce"
    GATHER = "gather"
    SCATTER = "scatter"
    BARRIER = "barrier"
    OTHER = "other"


class Collective(NamedTuple):
    """One collective the traced run executed; times in ms from its step's start.

    ``launch_ms`` is when the host issued it, ``start_ms``/``end_ms`` when it ran (the
    device kernel on GPUs, the transport thread on gloo); ``purpose`` is ``gradients``,
    ``buffers``, ``unused-map`` or ``other``; ``op`` is its launching op's id when that op
    belongs to the traced step.
    """

    id: str
    kind: CollectiveKind
    step: Optional[int]
    elements: Optional[int]
    dtype: Optional[str]
    nbytes: Optional[int]
    launch_ms: float
    start_ms: Optional[float]
    end_ms: Optional[float]
    purpose: str
    group_size: Optional[int] = None
    op: Optional[str] = None


class StepInfo(NamedTuple):
    """The traced step, for traces that record several (ms from the step's start)."""

    label: str
    index: Optional[int]
    duration_ms: float
    backward_start_ms: Optional[float]
    backward_end_ms: Optional[float]
    update_ms: Optional[float]
    steps: tuple[str, ...]  # every step the trace holds, by label
    world_size: Optional[int] = None


class NodeType(str, enum.Enum):
    """What a graph node is (Chakra: ``NodeType``, reduced to what a step trace holds)."""

    OP = "op"
    TENSOR = "tensor"
    COLLECTIVE = "collective"  # Chakra: COMM_COLL_NODE


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
        return self in BACKWARD_KINDS


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
    LAUNCH = "launch"  # op -> the collective it issued


class Op(NamedTuple):
    """One executed op (an immutable record; NamedTuple for cheap bulk construction).

    ``position`` is its place in the file (op records or schedule lines, from 0);
    ``inputs``/``outputs`` keep the exact order and repeats of the record (a backward op
    lists the tensors whose gradients it produces as outputs); ``partner`` is the forward
    op of a backward op; ``index`` is the trainable-variable index an op list names
    (Horovod's ``cond_N``, the optimizer's ``update_N``). ``start_ms``/``dur_ms`` are
    recorded times where the trace has them (profiler traces).
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
    start_ms: Optional[float] = None  # recorded start, ms from the step's start
    dur_ms: Optional[float] = None  # recorded duration


class Tensor(NamedTuple):
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
    sparse: bool = False  # its gradient is sparse (IndexedSlices): all-gathered, not reduced

    @property
    def elements(self) -> Optional[int]:
        """Element count from the shape, else from bytes and dtype; ``None`` if unknown."""
        if self.shape is not None:
            return math.prod(self.shape)
        if self.nbytes is not None and self.dtype in DTYPE_BYTES:
            return self.nbytes // DTYPE_BYTES[self.dtype]
        return None


class Link(NamedTuple):
    """An inferred edge between two nodes that op records do not spell out."""

    source: str
    target: str
    kind: EdgeKind


def __getattr__(name: str):
    """``TraceGraph`` is made on first use: networkx costs a tenth of a second to import,
    and most commands never build the graph."""
    if name == "TraceGraph":
        return _graph_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_GRAPH_CLASS = None


def _graph_class():
    global _GRAPH_CLASS
    if _GRAPH_CLASS is None:
        import networkx as nx

        class TraceGraph(nx.DiGraph):
            """A ``networkx.DiGraph`` whose nodes carry :class:`Op` or :class:`Tensor` data."""

        TraceGraph.__module__ = __name__
        _GRAPH_CLASS = TraceGraph
    return _GRAPH_CLASS


BACKWARD_KINDS = frozenset({OpKind.BACKWARD, OpKind.GRADIENT})
GENERIC_ABILITIES = Abilities(ReadinessMethod.RECORDED, ComputeSource.NONE, VariableOrder.INDEX,
                              "backward ops in recorded order; ready after the last producer")


class Trace:
    """A parsed step trace: its ops, tensors and links, and their graph.

    Build one with :meth:`Trace.build`; read it through the methods here so analyses never
    depend on networkx.

    >>> ops = [Op("op0", OpKind.FORWARD, "ReLU", line=3, position=0, inputs=("t0",),
    ...           outputs=("t1",))]
    >>> tensors = [Tensor("t0", TensorKind.INPUT, "0", 16), Tensor("t1", TensorKind.ACTIVATION, "_", 16)]
    >>> trace = Trace.build("x.txt", "chainer", ops, tensors)
    >>> trace.creator("t1").name, trace.consumers("t0")[0].id
    ('ReLU', 'op0')
    >>> sorted(trace.graph.edges(data="kind"))
    [('op0', 't1', <EdgeKind.DATA: 'data'>), ('t0', 'op0', <EdgeKind.DATA: 'data'>)]
    """

    def __init__(
        self,
        path: str,
        format: str,
        ops: Sequence[Op],
        tensors: Sequence[Tensor],
        links: Sequence[Link] = (),
        meta: Optional[Mapping[str, Any]] = None,
        abilities: Optional[Abilities] = None,
        collectives: Sequence[Collective] = (),
        step: Optional[StepInfo] = None,
    ):
        self.path = path
        self.format = format
        self.abilities = abilities or GENERIC_ABILITIES
        self._ops = list(ops)
        self._tensors = list(tensors)
        self._links = list(links)
        self._collectives = list(collectives)
        self.step = step
        self.meta = dict(meta or {})
        self._op_index: Optional[dict[str, Op]] = None
        self._tensor_by_id = {t.id: t for t in self._tensors}
        self._graph = None
        self._creators: Optional[dict[str, Op]] = None
        self._consumers: Optional[dict[str, list[Op]]] = None
        self._producers: Optional[dict[str, list[Op]]] = None
        self._linked: dict[EdgeKind, dict[str, list[str]]] = {}

    @classmethod
    def build(
        cls,
        path: str,
        format: str,
        ops: Iterable[Op],
        tensors: Iterable[Tensor],
        links: Iterable[Link] = (),
        meta: Optional[Mapping[str, Any]] = None,
        abilities: Optional[Abilities] = None,
        collectives: Iterable[Collective] = (),
        step: Optional[StepInfo] = None,
    ) -> "Trace":
        """A trace of ``ops``, ``tensors`` and inferred ``links``.

        Edges of an op follow from its record: a forward op reads its inputs and writes its
        outputs (``DATA``); a backward op reads its inputs (``DATA``), produces the
        gradients of its outputs (``GRADIENT``) and points at its ``partner``
        (``BACKWARD_OF``).
        """
        return cls(path, format, list(ops), list(tensors), list(links), meta, abilities,
                   list(collectives), step)

    @property
    def graph(self) -> "TraceGraph":
        """The networkx graph of the trace, built on first use."""
        if self._graph is None:
            graph = _graph_class()()
            graph.add_nodes_from((node, {"type": kind, "data": record})
                                 for node, kind, record in self.nodes())
            graph.add_edges_from(self.edges())
            self._graph = graph
        return self._graph

    def nodes(self) -> Iterator[tuple[str, NodeType, Any]]:
        """``(id, type, record)`` of every node: tensors, ops, collectives, in that order."""
        for t in self._tensors:
            yield t.id, NodeType.TENSOR, t
        for op in self._ops:
            yield op.id, NodeType.OP, op
        for c in self._collectives:
            yield c.id, NodeType.COLLECTIVE, c

    def edges(self) -> Iterator[tuple[str, str, dict]]:
        """``(source, target, {"kind", "index"?})`` of every edge, in record order; a
        (source, target) pair named twice keeps its first attributes. The graph and the
        exports are made from this one list.

        An op's own edges never repeat a pair (each names the op itself, inputs and outputs
        without repeats); only inferred links are checked against what came before them.
        """
        for u, v, attrs in _op_edges(self._ops):
            yield u, v, attrs
        seen: set[tuple[str, str]] = set()
        for link in self._links:
            pair = (link.source, link.target)
            if pair not in seen and not self._op_edge(*pair):
                seen.add(pair)
                yield link.source, link.target, {"kind": link.kind}
        for c in self._collectives:
            if c.op is not None and c.op in self._op_by_id:
                yield c.op, c.id, {"kind": EdgeKind.LAUNCH}

    # -- reading ----------------------------------------------------------------------

    def ops(self) -> list[Op]:
        """All ops in file order."""
        return self._ops

    def tensors(self) -> list[Tensor]:
        """All tensors in file (or variable) order."""
        return self._tensors

    def links(self) -> list[Link]:
        return self._links

    def collectives(self) -> list[Collective]:
        """Collectives the traced run executed (profiler traces), in launch order."""
        return self._collectives

    @property
    def _op_by_id(self) -> dict[str, Op]:
        if self._op_index is None:
            self._op_index = {op.id: op for op in self._ops}
        return self._op_index

    def op(self, op_id: str) -> Op:
        """The op of ``op_id``. Parsers name op K ``op<K>``: until the id index is built (a
        dict of every op, a tenth of a second on 500,000), an op is looked for at its place."""
        if self._op_index is None:
            found = self._at_place(op_id)
            if found is not None:
                return found
        return self._op_by_id[op_id]

    def _at_place(self, op_id: str) -> Optional[Op]:
        """Op K if ``op_id`` is its id ``op<K>`` (checked: any other id gives ``None``)."""
        try:
            op = self._ops[int(op_id[2:])]
        except (ValueError, IndexError):
            return None
        return op if op.id == op_id else None

    def ops_by_id(self, op_ids: Iterable[str]) -> dict[str, Op]:
        """The ops of ``op_ids`` (each must exist)."""
        op = self.op
        return {op_id: op(op_id) for op_id in dict.fromkeys(op_ids)}

    def tensor(self, tensor_id: str) -> Tensor:
        return self._tensor_by_id[tensor_id]

    def parameters(self) -> list[Tensor]:
        """Parameter tensors in file order (op lists: trainable-variable order)."""
        parameter = TensorKind.PARAMETER
        return [t for t in self._tensors if t.kind is parameter]

    def ops_of_kind(self, *kinds: OpKind) -> list[Op]:
        wanted = set(kinds)
        return [op for op in self._ops if op.kind in wanted]

    def creator(self, tensor_id: str) -> Optional[Op]:
        """The forward op that produced ``tensor_id``, or ``None`` for a leaf."""
        if self._creators is None:
            creators: dict[str, Op] = {}
            forward = OpKind.FORWARD
            for op in self._ops:
                if op.kind is forward:
                    for tid in op.outputs:
                        creators.setdefault(tid, op)
            self._creators = creators
        return self._creators.get(tensor_id)

    def consumers(self, tensor_id: str) -> list[Op]:
        """Ops that read ``tensor_id``, in file order."""
        if self._consumers is None:
            consumers: dict[str, list[Op]] = defaultdict(list)
            for op in self._ops:
                for tid in dict.fromkeys(op.inputs):
                    consumers[tid].append(op)
            self._consumers = dict(consumers)
        return list(self._consumers.get(tensor_id, ()))

    def gradient_producers(self, tensor_id: str) -> list[Op]:
        """Backward ops that produce a gradient of ``tensor_id``, in file order."""
        if self._producers is None:
            producers: dict[str, list[Op]] = {}
            for op in self._ops:
                outputs = op.outputs
                if outputs and op.kind in BACKWARD_KINDS:
                    for tid in dict.fromkeys(outputs) if len(outputs) > 1 else outputs:
                        if tid in producers:
                            producers[tid].append(op)
                        else:
                            producers[tid] = [op]
            self._producers = producers
        return list(self._producers.get(tensor_id, ()))

    def backward_ops_of(self, forward_id: str) -> list[Op]:
        return [op for op in self._ops if op.partner == forward_id]

    def linked(self, node: str, kind: EdgeKind) -> list[str]:
        """Targets of ``node``'s inferred links of ``kind``, sorted."""
        return list(self.links_of_kind(kind).get(node, ()))

    def links_of_kind(self, kind: EdgeKind) -> Mapping[str, Sequence[str]]:
        """Every node's targets of inferred links of ``kind``, sorted (a read-only view:
        one lookup a node for analyses that walk every parameter). Built per kind on
        first use."""
        of_kind = self._linked.get(kind)
        if of_kind is None:
            of_kind = self._linked[kind] = {}
            for source, target, link_kind in self._links:
                if link_kind == kind:
                    targets = of_kind.get(source)
                    if targets is None:
                        of_kind[source] = [target]
                    else:
                        targets.append(target)
            for targets in of_kind.values():
                if len(targets) > 1:
                    targets.sort()
        return MappingProxyType(of_kind)

    def find_forward_cycle(self) -> Optional[list[str]]:
        """Op ids of one cycle among forward ops (op -> op through a tensor), or ``None``.

        Ranks that rise along every edge prove there is none (Chainer's generations do: a
        function's rank exceeds its inputs' creators'), checked in one pass; otherwise
        Kahn's algorithm over plain dicts: linear, and fast on 100,000-op dumps.
        """
        kind = OpKind.FORWARD
        forward = [op for op in self._ops if op.kind is kind]
        if _ranks_rise(forward):
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
        node = min(stuck, key=lambda o: self._op_by_id[o].position)
        path: list[str] = []
        index: dict[str, int] = {}
        while node not in index:  # every stuck op has a stuck predecessor
            index[node] = len(path)
            path.append(node)
            node = next(p for p in preds[node] if p in stuck)
        return path[index[node]:]

    def counts(self) -> dict[str, int]:
        """Ops by kind, in the order of :class:`OpKind`."""
        seen = Counter(map(attrgetter("kind"), self._ops))
        return {kind.value: seen[kind] for kind in OpKind if seen[kind]}

    # -- export -----------------------------------------------------------------------

    def _op_edge(self, u: str, v: str) -> bool:
        """Whether an op's record already implies the edge ``u -> v``."""
        op = self._op_by_id.get(u)
        if op is not None and (v in op.outputs or v == op.partner):
            return True
        op = self._op_by_id.get(v)
        return op is not None and u in op.inputs

    def node_link(self) -> dict[str, Any]:
        """networkx node-link data (``nx.node_link_graph`` reads it back), JSON-ready."""
        return {
            "directed": True,
            "multigraph": False,
            "graph": {"path": self.path, "format": self.format, **_jsonable(self.meta)},
            "nodes": [node_entry(node, kind, record) for node, kind, record in self.nodes()],
            "links": [edge_entry(u, v, attrs) for u, v, attrs in self.edges()],
        }


def _ranks_rise(forward: list[Op]) -> bool:
    """Every forward op has a rank greater than those of its inputs' creators."""
    rank: dict[str, int] = {}
    for op in forward:
        if op.rank is None:
            return False
        for tid in op.outputs:
            rank[tid] = op.rank
    get = rank.get
    for op in forward:
        r = op.rank
        for tid in op.inputs:
            if get(tid, -1) >= r:
                return False
    return True


def node_entry(node: str, kind: NodeType, record: NamedTuple) -> dict[str, Any]:
    """A node as plain JSON values: its id, its type and its record's fields."""
    entry = {"id": node, "type": kind.value}
    entry.update(_plain(record))
    return entry


def edge_entry(u: str, v: str, attrs: dict) -> dict[str, Any]:
    entry = {"source": u, "target": v, "kind": attrs["kind"].value}
    if "index" in attrs:
        entry["index"] = attrs["index"]
    return entry


def _op_edges(ops: list[Op]) -> Iterator[tuple[str, str, dict]]:
    """Edges an op's record implies; a tensor listed twice keeps its first index."""
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


def _plain(obj: NamedTuple) -> dict[str, Any]:
    return {name: _jsonable(value) for name, value in zip(obj._fields, obj) if name != "id"}


_SCALARS = (str, int, float, bool, type(None))


def _jsonable(value: Any) -> Any:
    if type(value) in _SCALARS:  # the common case first: exact types, no ABC checks
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value
