"""Shape inference, FLOPs, device presets and compute profiles (DESIGN 2.1, 4.1)."""

from __future__ import annotations

import json

import pytest

from tracecli import load_trace, readiness
from tracecli.analysis.compute import DEVICES, compute_profile
from tracecli.parsers.op_times import load_op_times
from tracecli.analysis.shapes import infer_shapes, op_costs
from tracecli.errors import CalibrationError, PlanError

from conftest import FIXTURES, RESNET, VGG


@pytest.fixture(scope="module")
def vgg():
    trace = load_trace(VGG)
    return trace, readiness(trace)


def by_name(trace, name):
    return next(t for t in trace.tensors() if t.name == name)


def test_vgg_shapes(vgg):
    trace, _ = vgg
    shapes = infer_shapes(trace)
    assert shapes.batch == 32
    assert len(shapes.shapes) == len(trace.tensors())  # every tensor pinned down
    got = {name: shapes.shapes[by_name(trace, name).id] for name in (
        "/predictor/conv1_1/W", "/predictor/conv1_1/b", "/predictor/conv5_4/W",
        "/predictor/fc6/W", "/predictor/fc8/W", "0", "1")}
    assert got == {
        "/predictor/conv1_1/W": (64, 3, 3, 3), "/predictor/conv1_1/b": (64,),
        "/predictor/conv5_4/W": (512, 512, 3, 3), "/predictor/fc6/W": (4096, 25088),
        "/predictor/fc8/W": (1000, 4096), "0": (32, 3, 224, 224), "1": (32,),
    }


def test_vgg_flops(vgg):
    trace, _ = vgg
    costs = op_costs(trace)
    conv11 = next(op for op in trace.ops() if op.kind.value == "forward" and op.generation == 0)
    assert costs[conv11.id].flops == 2 * 32 * 64 * 224 * 224 * 3 * 3 * 3
    backward = next(op for op in trace.ops() if op.partner == conv11.id)
    assert costs[backward.id].flops == 2 * costs[conv11.id].flops
    total = sum(c.flops for op_id, c in costs.items() if trace.op(op_id).kind.value == "forward")
    # VGG19 does ~19.6 G multiply-adds per 224x224 image (39 GFLOPs), x32
    assert 1.2e12 < total < 1.3e12


def test_roofline_profile_and_devices(vgg):
    trace, ready = vgg
    slow = compute_profile(trace, ready, "v100")
    fast = compute_profile(trace, ready, "h100")
    assert len(slow.backward) == 46 and slow.backward_ms > fast.backward_ms > 0
    assert "v100" in slow.source and slow.forward_ms > 0
    times = slow.ready_times()
    assert times[0] == slow.forward_ms and times[-1] == pytest.approx(slow.forward_ms + slow.backward_ms)
    assert set(DEVICES) >= {"v100", "a100", "h100", "h200", "cpu"}


def test_backward_ms_rescales_keeping_proportions(vgg):
    trace, ready = vgg
    est = compute_profile(trace, ready, "v100")
    scaled = compute_profile(trace, ready, "v100", backward_ms=100.0)
    assert scaled.backward_ms == pytest.approx(100.0)
    ratio = scaled.backward[0][1] / est.backward[0][1]
    assert all(b[1] == pytest.approx(a[1] * ratio) for a, b in zip(est.backward, scaled.backward))
    assert scaled.forward_ms == pytest.approx(est.forward_ms * ratio)


def test_op_times_file(vgg, tmp_path):
    trace, ready = vgg
    first_bwd = ready.backward_ops[0]
    path = tmp_path / "times.json"
    path.write_text(json.dumps({"ops": {first_bwd: 7.5}, "layers": {"/predictor/fc6": 4.0},
                                "forward_ms": 50}))
    profile = compute_profile(trace, ready, "v100", load_op_times(path))
    times = dict(profile.backward)
    assert times[first_bwd] == 7.5
    fc6 = [op_id for op_id in ready.backward_ops if trace.op(op_id).layer == "/predictor/fc6"]
    assert sum(times[o] for o in fc6) == pytest.approx(4.0)
    assert profile.forward_ms == 50 and "timing file" in profile.source


@pytest.mark.parametrize("text,line", [("{", 1), ('{"ops": {"a": -1}}', 1), ('{"x": "slow"}', 1),
                                       ('{"ops": {}, "nope": 1}', 1), ("[1]", 1), ("{}", 1)])
def test_bad_op_times(tmp_path, text, line):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(CalibrationError) as err:
        load_op_times(path)
    assert str(err.value).startswith(f"{path}:{line}:")


def test_op_lists_need_a_backward_time():
    trace = load_trace(RESNET)
    ready = readiness(trace)
    with pytest.raises(PlanError, match="--backward-ms"):
        compute_profile(trace, ready)
    profile = compute_profile(trace, ready, backward_ms=90.0)
    assert profile.backward_ms == pytest.approx(90.0)
    assert profile.forward_ms == pytest.approx(45.0) and "half of backward" in profile.source
    assert len({ms for _, ms in profile.backward}) == 1


def test_small_fixture_shapes():
    trace = load_trace(FIXTURES / "mlp_chainer.txt")
    shapes = infer_shapes(trace).shapes
    # /l1/W has 4096 bytes and /l1/b 16 outputs: W is (out, in) = (16, 64)
    assert shapes["t2"] == (16, 64) and shapes["t3"] == (16,)


def test_flat_op_times_name_ops_and_layers(vgg, tmp_path):
    trace, ready = vgg
    first_bwd = ready.backward_ops[0]
    path = tmp_path / "flat.json"
    path.write_text(json.dumps({first_bwd: 1.25, "/predictor/conv1_1": 3.0, "forward_ms": 20}))
    profile = compute_profile(trace, ready, "v100", load_op_times(path))
    times = dict(profile.backward)
    assert times[first_bwd] == 1.25 and profile.forward_ms == 20
    conv11 = [o for o in ready.backward_ops if trace.op(o).layer == "/predictor/conv1_1"]
    assert sum(times[o] for o in conv11) == pytest.approx(3.0)


@pytest.mark.parametrize("doc,words", [({"/predictor/nope": 1.0}, "no op or layer"),
                                       ({"ops": {"op9999": 1.0}}, "does not have"),
                                       ({"layers": {"/x": 1.0}}, "does not have")])
def test_op_times_naming_nothing_in_the_trace(vgg, tmp_path, doc, words):
    trace, ready = vgg
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match=words) as err:
        compute_profile(trace, ready, "v100", load_op_times(path))
    assert str(err.value).startswith(f"{path}:1:")


def test_forward_is_timed_op_by_op_where_the_source_can(vgg):
    """Roofline (Chainer) and profiled (Kineto) forward come per op, summing to forward;
    an op list has only --forward-ms or half of backward, so no per-op forward."""
    trace, ready = vgg
    p = compute_profile(trace, ready, "h100")
    forward_ops = [op.id for op in trace.ops() if op.kind.value == "forward"]
    assert [op_id for op_id, _ in p.forward] == forward_ops
    assert sum(ms for _, ms in p.forward) == pytest.approx(p.forward_ms, rel=1e-9)
    scaled = compute_profile(trace, ready, "h100", backward_ms=50.0, forward_ms=20.0)
    assert sum(ms for _, ms in scaled.forward) == pytest.approx(20.0)
    profiled = load_trace(FIXTURES / "kineto" / "mlp_default.json.gz")
    q = compute_profile(profiled, readiness(profiled))
    assert q.forward and all(ms >= 0 for _, ms in q.forward)
    assert sum(ms for _, ms in q.forward) == pytest.approx(q.forward_ms, rel=1e-6)
    op_list = load_trace(RESNET)
    assert compute_profile(op_list, readiness(op_list), backward_ms=100.0).forward == ()


def test_ready_at_clamps_past_the_last_backward_op(vgg):
    trace, ready = vgg
    p = compute_profile(trace, ready, "h100")
    times = p.ready_times()
    assert p.ready_at(0) == times[0] == p.forward_ms
    assert p.ready_at(len(times) + 5) == times[-1]
