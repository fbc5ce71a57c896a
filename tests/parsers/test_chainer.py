"""Chainer dump parsing and readiness (DESIGN 2.1)."""

from __future__ import annotations

from tracecli import load_trace, readiness
from tracecli.analysis import backward_schedule
from tracecli.model import EdgeKind, OpKind, TensorKind

from conftest import FIXTURES, VGG


def names(trace):
    return [g.name for g in readiness(trace).gradients]


def test_mlp_fields_and_pairing():
    trace = load_trace(FIXTURES / "mlp_chainer.txt")
    assert trace.format == "chainer"
    assert len(trace.ops()) == 8 and len(trace.tensors()) == 9
    kinds = {t.name: t.kind for t in trace.tensors()}
    assert kinds["/l1/W"] is TensorKind.PARAMETER
    assert kinds["0"] is TensorKind.INPUT and kinds["_"] is TensorKind.ACTIVATION
    assert trace.tensor("t2").layer == "/l1"
    backward = trace.ops_of_kind(OpKind.BACKWARD)
    assert [trace.op(b.partner).name for b in backward] == [b.name for b in backward]
    assert trace.op(backward[1].partner).position == 2  # the second LinearFunction
    assert backward[1].layer == "/l2"
    assert trace.op("op0").attrs == {"rank": 0}
    assert trace.op("op4").input_roles == ("gradient", "input")
    # graph edges: data, gradient and backward_of
    assert trace.graph.edges["t0", "op0"]["kind"] is EdgeKind.DATA
    assert trace.graph.edges["op7", "t2"]["kind"] is EdgeKind.GRADIENT
    assert trace.graph.edges["op7", "op0"]["kind"] is EdgeKind.BACKWARD_OF


def test_mlp_readiness_order():
    ready = readiness(load_trace(FIXTURES / "mlp_chainer.txt"))
    assert [g.name for g in ready.gradients] == ["/l2/W", "/l1/W", "/l1/b"]
    assert [l.name for l in ready.layers] == ["/l2", "/l1"]
    assert [g.backward_position for g in ready.gradients] == [2, 4, 4]
    assert ready.layers[1].nbytes == 4096 + 64 and ready.layers[1].elements == (4096 + 64) // 4


def test_record_order_in_file_does_not_matter(dump, tmp_path):
    x = dump.tensor(64, "0")
    w1, w2 = dump.tensor(16, "/a/W"), dump.tensor(16, "/b/W")
    h, y, loss = dump.tensor(64), dump.tensor(64), dump.tensor(4)
    dump.forward("LinearFunction", [x, w1], [h], 0)
    dump.forward("LinearFunction", [h, w2], [y], 1)
    dump.forward("Sum", [y], [loss], 2)
    a = load_trace(dump.write(tmp_path / "a.txt"))
    b = load_trace(dump.write(tmp_path / "b.txt", backward_first=True))
    assert names(a) == names(b) == ["/b/W", "/a/W"]


def branching(dump, add_inputs_reversed: bool):
    """x -> f -> a; a -> g(W_g) -> b; a -> h(W_h) -> c; add -> loss. g, h share rank 1."""
    x = dump.tensor(64, "0")
    wf, wg, wh = dump.tensor(16, "/f/W"), dump.tensor(16, "/g/W"), dump.tensor(16, "/h/W")
    a, b, c, d, loss = (dump.tensor(64) for _ in range(5))
    dump.forward("LinearFunction", [x, wf], [a], 0)
    dump.forward("LinearFunction", [a, wh], [c], 1)  # h before g in the file
    dump.forward("LinearFunction", [a, wg], [b], 1)
    dump.forward("Add", [c, b] if add_inputs_reversed else [b, c], [d], 2)
    dump.forward("Sum", [d], [loss], 3)


def test_discovery_counter_breaks_rank_ties(dump, tmp_path):
    # Add's inputs (b, c): g is discovered first, so it runs first although h comes
    # first in the file and has the same rank.
    branching(dump, add_inputs_reversed=False)
    assert names(load_trace(dump.write(tmp_path / "t.txt"))) == ["/g/W", "/h/W", "/f/W"]


def test_discovery_counter_follows_input_order(dump, tmp_path):
    branching(dump, add_inputs_reversed=True)
    assert names(load_trace(dump.write(tmp_path / "t.txt"))) == ["/h/W", "/g/W", "/f/W"]


def test_shared_parameter_ready_after_last_contribution(dump, tmp_path):
    x = dump.tensor(64, "0")
    w, v = dump.tensor(16, "/shared/W"), dump.tensor(16, "/mid/W")
    h1, h2, h3, loss = (dump.tensor(64) for _ in range(4))
    dump.forward("LinearFunction", [x, w], [h1], 0)
    dump.forward("LinearFunction", [h1, v], [h2], 1)
    dump.forward("LinearFunction", [h2, w], [h3], 2)  # W applied again
    dump.forward("Sum", [h3], [loss], 3)
    trace = load_trace(dump.write(tmp_path / "t.txt"))
    ready = readiness(trace)
    assert [g.name for g in ready.gradients] == ["/mid/W", "/shared/W"]
    assert len(trace.gradient_producers("t1")) == 2
    assert ready.gradients[1].backward_position == 4


def test_parameter_without_gradient_is_reported(dump, tmp_path):
    x = dump.tensor(64, "0")
    w, frozen = dump.tensor(16, "/a/W"), dump.tensor(16, "/frozen/W")
    h, loss = dump.tensor(64), dump.tensor(4)
    dump.forward("LinearFunction", [x, w, frozen], [h], 0, grads_for=[w])
    dump.forward("Sum", [h], [loss], 1)
    ready = readiness(load_trace(dump.write(tmp_path / "t.txt")))
    assert [g.name for g in ready.gradients] == ["/a/W"]
    assert ready.without_gradient == ("/frozen/W",)


def test_vgg19_sample():
    trace = load_trace(VGG)
    assert (len(trace.tensors()), len(trace.ops())) == (86, 92)
    assert trace.counts() == {"forward": 46, "backward": 46}
    ready = readiness(trace)
    assert len(ready.gradients) == 38 and len(ready.layers) == 19
    assert ready.total_bytes == 574_668_960
    layers = [l.name for l in ready.layers]
    assert layers[0] == "/predictor/fc8" and layers[-1] == "/predictor/conv1_1"
    expected = ["/predictor/fc8", "/predictor/fc7", "/predictor/fc6"] + [
        f"/predictor/conv{b}_{i}" for b, n in ((5, 4), (4, 4), (3, 4), (2, 2), (1, 2))
        for i in range(n, 0, -1)
    ]
    assert layers == expected
    # W and b of one function are ready together, in the function's output order
    assert [g.name for g in ready.gradients[:2]] == ["/predictor/fc8/W", "/predictor/fc8/b"]
    assert ready.gradients[0].backward_position == ready.gradients[1].backward_position
    # the backward schedule starts at the loss and visits all 46 backward records
    schedule = backward_schedule(trace)
    assert len(schedule) == 46 and schedule[0].name == "SoftmaxCrossEntropy"
    assert schedule[-1].name == "Convolution2DFunction" and schedule[-1].generation == 0
    ranks = [op.generation for op in schedule]
    assert ranks == sorted(ranks, reverse=True)  # VGG is a chain


def test_an_unused_output_does_not_start_backward(dump, tmp_path):
    """A: x->a, B: x->b (rank 0); M: split(a)->(m1, unused) and N: b->n (rank 1);
    Add(n, m1) (rank 2); Sum (rank 3). From the loss alone N is discovered before M, so B's
    gradient is ready before A's. Were M a root (its second output is unused), it would be
    discovered first and A would come before B."""
    x = dump.tensor(64, "0")
    wa, wb, wn = dump.tensor(16, "/a/W"), dump.tensor(16, "/b/W"), dump.tensor(16, "/n/W")
    a, b, m1, m2, n, s, loss = (dump.tensor(32) for _ in range(7))
    dump.forward("LinearFunction", [x, wa], [a], 0)
    dump.forward("LinearFunction", [x, wb], [b], 0)
    dump.forward("SplitAxis", [a], [m1, m2], 1)
    dump.forward("LinearFunction", [b, wn], [n], 1)
    dump.forward("Add", [n, m1], [s], 2)
    dump.forward("Sum", [s], [loss], 3)
    trace = load_trace(dump.write(tmp_path / "t.txt"))
    assert names(trace) == ["/n/W", "/b/W", "/a/W"]


def test_forward_cycles_found_whether_or_not_ranks_rise():
    """Rising ranks prove a forward graph acyclic in one pass; ranks that do not rise
    (equal, or missing) fall back to the full search, which finds a cycle or none."""
    from tracecli.model import Op, Tensor, Trace

    def trace(ranks, edges):  # edges: (op, input tensor, output tensor)
        ops = [Op(f"op{k}", OpKind.FORWARD, "F", k + 1, k, generation=r, inputs=(i,), outputs=(o,))
               for k, (r, (i, o)) in enumerate(zip(ranks, edges))]
        tensors = [Tensor(f"t{k}", TensorKind.ACTIVATION, "_", 4) for k in range(4)]
        return Trace.build("x", "chainer", ops, tensors)

    chain = [("t0", "t1"), ("t1", "t2"), ("t2", "t3")]
    loop = [("t0", "t1"), ("t1", "t2"), ("t2", "t1")]
    assert trace([0, 1, 2], chain).find_forward_cycle() is None
    assert trace([0, 0, 0], chain).find_forward_cycle() is None
    assert trace([None, None, None], chain).find_forward_cycle() is None
    assert sorted(trace([0, 1, 2], loop).find_forward_cycle()) == ["op1", "op2"]
    assert sorted(trace([5, 5, 5], loop).find_forward_cycle()) == ["op1", "op2"]
