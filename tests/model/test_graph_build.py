"""The networkx graph of a trace (issue 22 item 7): ``graph_of`` builds exactly the graph
networkx's own ``add_nodes_from``/``add_edges_from`` would, and the analyses that read the
records (Chainer's backward/forward pairing and autograd replay) agree with what the graph
says, walked here with networkx's public API, independently of tracecli's indexes."""

from __future__ import annotations

import heapq
import importlib.util
import pickle
from pathlib import Path

import networkx as nx
import pytest

import tracecli
from tracecli.analysis import backward_schedule
from tracecli.model import EdgeKind, NodeType, Op, OpKind, Tensor, TensorKind
from tracecli.model.graph import graph_of

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TRACES = sorted([*ROOT.glob("sample_traces/*.txt"), *ROOT.glob("sample_traces/*.json.gz"),
                 *FIXTURES.glob("*.txt"), *FIXTURES.glob("kineto/*.json.gz"),
                 *FIXTURES.glob("sparse/*.txt")])
_spec = importlib.util.spec_from_file_location("parse_scale", ROOT / "benchmarks" / "parse_scale.py")
parse_scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parse_scale)


def networkx_graph(trace) -> nx.DiGraph:
    """The graph as networkx's own methods build it from the trace's node and edge lists."""
    graph = nx.DiGraph()
    graph.add_nodes_from((n, {"type": kind, "data": record}) for n, kind, record in trace.nodes())
    graph.add_edges_from(trace.edges())
    return graph


def same(ours: nx.DiGraph, theirs: nx.DiGraph) -> None:
    """Equal nodes, attributes and edges, each in the same order (out- and in-edges)."""
    assert list(ours.nodes(data=True)) == list(theirs.nodes(data=True))
    assert list(ours.edges(data=True)) == list(theirs.edges(data=True))
    assert list(ours.in_edges(data=True)) == list(theirs.in_edges(data=True))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_graph_is_networkx_own(path):
    trace = tracecli.load_trace(path)
    assert trace.graph.number_of_edges() > 0
    same(trace.graph, networkx_graph(trace))


def test_repeated_pairs_and_unknown_ends_as_add_edges_from():
    relu = Op("op0", OpKind.FORWARD, "ReLU", 1, 0, inputs=("t0", "t0"), outputs=("t1",))
    tensors = [Tensor("t0", TensorKind.INPUT, "x", 4)]  # t1 is no tensor record
    extra = [("t1", "c0", {"kind": EdgeKind.LAUNCH}), ("t1", "c0", {"kind": EdgeKind.NEXT, "index": 2})]
    ours = graph_of(tensors, [relu], (), [(u, v, dict(attrs)) for u, v, attrs in extra])
    theirs = nx.DiGraph()
    theirs.add_nodes_from([("t0", {"type": NodeType.TENSOR, "data": tensors[0]}),
                           ("op0", {"type": NodeType.OP, "data": relu})])
    theirs.add_edges_from([("t0", "op0", {"kind": EdgeKind.DATA, "index": 0}),
                           ("op0", "t1", {"kind": EdgeKind.DATA, "index": 0}), *extra])
    same(ours, theirs)
    assert ours.edges["t1", "c0"] == {"kind": EdgeKind.NEXT, "index": 2}
    assert ours.nodes["c0"] == {}


def test_graph_pickles():
    graph = tracecli.load_trace(ROOT / "sample_traces" / "vgg19_chainer.txt").graph
    back = pickle.loads(pickle.dumps(graph))
    assert type(back) is type(graph) and type(back).__name__ == "TraceGraph"
    same(back, graph)


def replay_on_graph(graph: nx.DiGraph) -> list[str]:
    """``chainer.Variable.backward``'s order (DESIGN 2.1) from the graph alone: start at the
    forward op whose outputs no forward op reads; a heap keyed by (-rank, discovery
    counter); pop a function, run its backward (the source of its ``backward_of`` edge),
    push the creator of each of its inputs (in input order) never pushed before."""
    def record(n):
        return graph.nodes[n]["data"]

    def forward(n):
        return graph.nodes[n]["type"] is NodeType.OP and record(n).kind is OpKind.FORWARD

    def inputs(f):
        ins = [(a["index"], t) for t, _, a in graph.in_edges(f, data=True) if a["kind"] is EdgeKind.DATA]
        return [t for _, t in sorted(ins)]

    def creator(t):
        return next((u for u, _, a in graph.in_edges(t, data=True)
                     if a["kind"] is EdgeKind.DATA and forward(u)), None)

    def backward(f):
        return next((u for u, _, a in graph.in_edges(f, data=True)
                     if a["kind"] is EdgeKind.BACKWARD_OF), None)

    ops = [n for n in graph if forward(n)]
    roots = [f for f in ops if backward(f) is not None and list(graph.successors(f))
             and not any(forward(c) for t in graph.successors(f) for c in graph.successors(t))]
    roots.sort(key=lambda f: (-record(f).generation, record(f).position))
    heap, pushed, order = [], set(), []
    for f in roots:
        heapq.heappush(heap, (-record(f).generation, len(pushed), f))
        pushed.add(f)
    while heap:
        f = heapq.heappop(heap)[2]
        if backward(f) is not None:
            order.append(backward(f))
        for t in inputs(f):
            c = creator(t)
            if c is not None and c not in pushed:
                heapq.heappush(heap, (-record(c).generation, len(pushed), c))
                pushed.add(c)
    return order


def pairs_fit(graph: nx.DiGraph) -> None:
    """Each backward op's ``backward_of`` edge goes to a forward op of its class and rank
    that read every array it produces a gradient for and wrote every upstream gradient it
    reads; no forward op has two."""
    partners = {}
    for b, f, a in graph.edges(data=True):
        if a["kind"] is not EdgeKind.BACKWARD_OF:
            continue
        back, fwd = graph.nodes[b]["data"], graph.nodes[f]["data"]
        assert (back.kind, fwd.kind) == (OpKind.BACKWARD, OpKind.FORWARD)
        assert (back.name, back.generation, back.layer) == (fwd.name, fwd.generation, fwd.layer)
        assert back.partner == f and f not in partners
        partners[f] = b
        produced = [t for _, t, e in graph.out_edges(b, data=True) if e["kind"] is EdgeKind.GRADIENT]
        assert all(graph.has_edge(t, f) for t in produced)
        grads = [t for t, role in zip(back.inputs, back.input_roles) if role == "gradient"]
        assert all(graph.edges[f, t]["kind"] is EdgeKind.DATA for t in grads)
    backward_ops = [n for n, d in graph.nodes(data="data") if getattr(d, "kind", None) is OpKind.BACKWARD]
    assert len(partners) == len(backward_ops)


def chainer_dumps(tmp_path: Path) -> list[Path]:
    residual, fan_in = tmp_path / "residual.txt", tmp_path / "fan_in.txt"
    parse_scale.chainer_dump(residual, 3000)  # a conv/ReLU chain with residual adds
    parse_scale.fan_in(fan_in, 300)  # one array read by 300 ops of one class and rank
    return [ROOT / "sample_traces" / "vgg19_chainer.txt", FIXTURES / "mlp_chainer.txt",
            residual, fan_in]


def test_records_analyses_agree_with_the_graph(tmp_path):
    for path in chainer_dumps(tmp_path):
        trace = tracecli.load_trace(path)
        pairs_fit(trace.graph)
        order = [op.id for op in backward_schedule(trace)]
        assert order == replay_on_graph(trace.graph), path.name
        assert len(order) == len(trace.ops_of_kind(OpKind.BACKWARD)), path.name
