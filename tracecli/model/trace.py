"""The Trace: one training step's records, and the relations analyses ask of them.

The relations analyses need (creator, consumers, gradient producers, links) are answered
from plain-dict indexes of the records, built on first use; :attr:`Trace.graph` is the
networkx graph of the same records, built once on first use from the node and edge lists
the exports write. Analyses read the records because building the graph in every
command's main path would take ``inspect`` past its 3 s target on the 100,000-op Chainer
dump and the 500,000-line op list (measured: :mod:`tracecli.model.graph`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from .._gc import gc_paused
from .graph import find_forward_cycle, graph_of, op_edges
from .kinds import BACKWARD_KINDS, GENERIC_ABILITIES, Abilities, EdgeKind, NodeType, OpKind, TensorKind
from .records import Collective, Link, Op, StepInfo, Tensor, TraceMeta

__all__ = ["Trace"]


class Trace:
    """A parsed step trace: its ops, tensors and links, and their networkx graph.

    Build one with :meth:`Trace.build` (a library user: ``tracecli.load_trace(path)``);
    ``meta`` is the trace's :class:`TraceMeta`. :attr:`graph` is the networkx ``DiGraph``
    of the step, one attribute away from a loaded trace:

    >>> import tracecli
    >>> graph = tracecli.load_trace("sample_traces/vgg19_chainer.txt").graph
    >>> graph.number_of_nodes(), graph.number_of_edges()
    (178, 375)
    >>> graph.nodes["op0"]["data"].name, graph.edges["op46", "op0"]["kind"].value
    ('ReLU', 'backward_of')

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
        meta: Optional[TraceMeta] = None,
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
        self.meta = meta if meta is not None else TraceMeta()
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
        meta: Optional[TraceMeta] = None,
        abilities: Optional[Abilities] = None,
        collectives: Iterable[Collective] = (),
        step: Optional[StepInfo] = None,
    ) -> "Trace":
        """A trace of ``ops``, ``tensors`` and inferred ``links``; the edges of an op follow
        from its record (:func:`tracecli.model.graph.op_edges`)."""
        return cls(path, format, list(ops), list(tensors), list(links), meta, abilities,
                   list(collectives), step)

    @property
    def graph(self) -> "TraceGraph":  # noqa: F821 (made on first use: tracecli.model.graph)
        """The networkx graph of the trace (a :class:`~tracecli.model.graph.TraceGraph`),
        built on first use; its nodes and edges are :meth:`nodes` and :meth:`edges`."""
        if self._graph is None:
            with gc_paused():  # a million small dicts and no cycles: nothing to collect
                self._graph = graph_of(self._tensors, self._ops, self._collectives,
                                       self._inferred_edges(), self._units())
        return self._graph

    def nodes(self) -> Iterator[tuple[str, NodeType, Any]]:
        """``(id, type, record)`` of every node: tensors, ops, collectives, in that order."""
        for t in self._tensors:
            yield t.id, NodeType.TENSOR, t
        for op in self._ops:
            yield op.id, NodeType.OP, op
        for c in self._collectives:
            yield c.id, NodeType.COLLECTIVE, c
        for u in self._units():
            yield u.id, NodeType.UNIT, u

    def _units(self) -> list:
        """An FSDP run's units, as graph nodes (none for other traces)."""
        return self.meta.fsdp.nodes() if self.meta.fsdp is not None else []

    def edges(self) -> Iterator[tuple[str, str, dict]]:
        """``(source, target, {"kind", "index"?})`` of every edge, in record order; a
        (source, target) pair named twice keeps its first attributes. The graph and the
        exports are made from this one list.

        An op's own edges never repeat a pair (each names the op itself, inputs and outputs
        without repeats); only inferred links are checked against what came before them.
        """
        yield from op_edges(self._ops)
        yield from self._inferred_edges()

    def _inferred_edges(self) -> Iterator[tuple[str, str, dict]]:
        """The edges no op record spells out: links, launches, a stream's order."""
        seen: set[tuple[str, str]] = set()
        for link in self._links:
            pair = (link.source, link.target)
            if pair not in seen and not self._op_edge(*pair):
                seen.add(pair)
                yield link.source, link.target, {"kind": link.kind}
        last_on: dict[str, str] = {}
        for c in self._collectives:
            if c.op is not None and c.op in self._op_by_id:
                yield c.op, c.id, {"kind": EdgeKind.LAUNCH}
            if c.lane is not None:  # launch order is run order on one stream
                if c.lane in last_on:
                    yield last_on[c.lane], c.id, {"kind": EdgeKind.NEXT}
                last_on[c.lane] = c.id
        if self.meta.fsdp is not None:
            for source, target, kind in self.meta.fsdp.edges():
                yield source, target, {"kind": EdgeKind(kind)}

    def _op_edge(self, u: str, v: str) -> bool:
        """Whether an op's record already implies the edge ``u -> v``."""
        op = self._op_by_id.get(u)
        if op is not None and (v in op.outputs or v == op.partner):
            return True
        op = self._op_by_id.get(v)
        return op is not None and u in op.inputs

    # -- reading ----------------------------------------------------------------------

    def ops(self) -> list[Op]:
        """All ops in file order."""
        return self._ops

    def tensors(self) -> list[Tensor]:
        """All tensors in file (or variable) order."""
        return self._tensors

    def collectives(self) -> list[Collective]:
        """Collectives the traced run executed (profiler traces), in launch order."""
        return self._collectives

    def with_links(self, links: Iterable[Link]) -> "Trace":
        """This trace with more inferred links (e.g. the as-run match's ``carried_by``)."""
        return Trace(self.path, self.format, self._ops, self._tensors,
                     self._links + list(links), self.meta, self.abilities,
                     self._collectives, self.step)

    def with_collectives(self, collectives: Sequence[Collective], note: Optional[str] = None) -> "Trace":
        """This trace with other collective times (e.g. a run's transfer times), and a note."""
        meta = dataclasses.replace(self.meta, notes=self.meta.notes + (note,)) if note else self.meta
        return Trace(self.path, self.format, self._ops, self._tensors, self._links, meta,
                     self.abilities, list(collectives), self.step)

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
        """The tensor of ``tensor_id``."""
        return self._tensor_by_id[tensor_id]

    def parameters(self) -> list[Tensor]:
        """Parameter tensors in file order (op lists: trainable-variable order)."""
        parameter = TensorKind.PARAMETER
        return [t for t in self._tensors if t.kind is parameter]

    def ops_of_kind(self, *kinds: OpKind) -> list[Op]:
        """Ops of any of ``kinds``, in file order."""
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
        """Op ids of one cycle among forward ops, or ``None``
        (:func:`tracecli.model.graph.find_forward_cycle`)."""
        return find_forward_cycle(self._ops)

    def counts(self) -> dict[str, int]:
        """Ops by kind, in the order of :class:`OpKind`."""
        seen = Counter(map(attrgetter("kind"), self._ops))
        return {kind.value: seen[kind] for kind in OpKind if seen[kind]}
