"""TensorFlow / Horovod op lists (DESIGN 2.2)."""

from __future__ import annotations

import json
import shutil

import pytest

from tracecli import LoadOptions, load_trace, readiness
from tracecli.errors import SizesError
from tracecli.model import EdgeKind, OpKind
from tracecli.parsers.tf_schedule import classify

from conftest import RESNET, RESNET_SIZES, assert_error, run


@pytest.mark.parametrize("name,kind,index", [
    ("resnet50/avg_pool/Mean/reduction_indices", OpKind.SETUP, None),
    ("ConstantFolding/gradient_tape/resnet50/avg_pool/truediv_recip", OpKind.SETUP, None),
    ("gradient_tape/resnet50/conv1_conv/Conv2D/Conv2DBackpropFilter-0-PermConstNHWCToNCHW-LayoutOptimizer", OpKind.SETUP, None),
    ("gradient_tape/resnet50/conv2_block1_1_conv/Conv2D/ShapeN", OpKind.SETUP, None),
    ("resnet50/conv2_block1_out/Relu", OpKind.OTHER, None),  # forward only once scoped
    ("gradient_tape/resnet50/conv2_block1_1_relu/ReluGrad", OpKind.BACKWARD, None),
    ("gradient_tape/resnet50/conv2_block1_1_bn/FusedBatchNormGradV3", OpKind.GRADIENT, None),
    ("gradient_tape/resnet50/predictions/MatMul_1", OpKind.GRADIENT, None),
    ("gradient_tape/resnet50/predictions/MatMul", OpKind.BACKWARD, None),
    ("Func/DistributedGradientTape_Allreduce/cond/else/_1/input/_1717", OpKind.ALLREDUCE_INPUT, 0),
    ("DistributedGradientTape_Allreduce/cond_11/output/_94", OpKind.ALLREDUCE_OUTPUT, 11),
    ("DistributedGradientTape_Allreduce/cond_7/then/_3/HorovodAllreduce_gradient_tape_m_d_BiasAddGrad_0", OpKind.ALLREDUCE, 7),
    ("SGD/SGD/update/ResourceApplyGradientDescent", OpKind.UPDATE, 0),
    ("SGD/SGD/update_12/ResourceApplyGradientDescent", OpKind.UPDATE, 12),
    ("HorovodBroadcast.conv1_bn_gamma_0/ReadVariableOp", OpKind.BROADCAST, None),
    ("HorovodBroadcast_conv1_bn_gamma_0", OpKind.BROADCAST, None),
    ("AddN_15", OpKind.BACKWARD, None),
    ("AssignVariableOp_3", OpKind.OTHER, None),
])
def test_classify(name, kind, index):
    assert classify(name) == (kind, index)


def test_whole_text_checks_agree_with_their_definitions():
    """The fast paths (substring searches where a regular expression searched from every
    position) decide as the definitions do, on seeded random names and texts."""
    import random
    import re

    from tracecli.parsers import tf_names, tf_schedule as tf

    allreduce = re.compile(r"(?:^|/)\w*Allreduce/cond(?:_(\d+))?/")
    update = re.compile(r"(?:^|/)update(?:_(\d+))?/")
    rng = random.Random(7)
    parts = ["Allreduce", "cond", "cond_", "cond_12", "/", "_", "x", "update", "update_3", "-",
             ".", "7", "Allreduce/cond", "Dist"]
    for _ in range(20_000):
        name = "".join(rng.choice(parts) for _ in range(rng.randint(1, 8)))
        for pattern, found in (
                (allreduce, tf_names.scoped(name, "Allreduce/cond", tf_names.ALLREDUCE_AT, whole=False)),
                (update, tf_names.scoped(name, "update", tf_names.UPDATE_AT, whole=True))):
            expected = pattern.search(name)
            assert (expected is None) == (found is None), name
            if expected:
                assert (expected.group(1), expected.end()) == (found.group(1), found.end()), name
    chars = list("ab/_-:>.\n\n \t\u00e91")
    for _ in range(20_000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 10)))
        expected = not (tf._BAD_CHAR_RE.search(text) or tf._INNER_SPACE_RE.search(text)
                        or tf._BAD_START_RE.search(text))
        assert tf.names_only(text) == expected, repr(text)


def test_resnet50_sample():
    trace = load_trace(RESNET)
    assert trace.meta.sizes.endswith("resnet50_horovod_tf.sizes.json")
    ready = readiness(trace)
    assert len(ready.gradients) == 214 and ready.total_bytes == 102_334_368
    assert sum(g.elements for g in ready.gradients) == 25_583_592
    names = [g.name for g in ready.gradients]
    assert names[:2] == ["predictions/bias:0", "predictions/kernel:0"]
    assert set(names[-4:]) == {"conv1_conv/kernel:0", "conv1_conv/bias:0",
                               "conv1_bn/gamma:0", "conv1_bn/beta:0"}
    assert {g.layer for g in ready.gradients[-2:]} == {"conv1_conv"}
    assert all(g.source == "horovod" for g in ready.gradients)
    # each gradient's readiness is the first node that names cond_N
    positions = [trace.op(g.op).position for g in ready.gradients]
    assert positions == sorted(positions)
    assert ready.layers[0].name == "predictions" and ready.layers[-1].name == "conv1_conv"


def test_resnet50_links():
    trace = load_trace(RESNET)
    v0 = trace.tensor("v0")  # conv1_conv/kernel:0
    handoff = trace.linked("v0", EdgeKind.HANDOFF)
    assert [trace.op(o).kind for o in handoff] == [OpKind.ALLREDUCE_INPUT]
    out = trace.linked(handoff[0], EdgeKind.ALLREDUCE)
    assert trace.op(out[0]).kind is OpKind.ALLREDUCE_OUTPUT
    update = trace.linked(out[0], EdgeKind.UPDATE)
    assert trace.op(update[0]).name == "SGD/SGD/update/ResourceApplyGradientDescent"
    producers = trace.gradient_producers(v0.id)
    assert [p.name for p in producers] == ["gradient_tape/resnet50/conv1_conv/Conv2D/Conv2DBackpropFilter"]


def test_without_horovod_nodes_readiness_comes_from_producers(tmp_path):
    lines = [l for l in RESNET.read_text().splitlines()
             if "Allreduce" not in l and "Horovod" not in l]
    path = tmp_path / "plain.txt"
    path.write_text("\n".join(lines) + "\n")
    shutil.copy(RESNET_SIZES, tmp_path / "plain.sizes.json")
    ready = readiness(load_trace(path))
    assert len(ready.gradients) == 214
    assert all(g.source == "producer" for g in ready.gradients)
    assert [g.name for g in ready.gradients[:2]] == ["predictions/bias:0", "predictions/kernel:0"]
    assert [g.layer for g in ready.gradients[-4:]] == ["conv1_bn", "conv1_bn", "conv1_conv", "conv1_conv"]
    # the layer order agrees with Horovod's
    horovod = [l.name for l in readiness(load_trace(RESNET)).layers]
    assert [l.name for l in ready.layers] == horovod


def test_plain_list_without_sizes_gives_layer_order(tmp_path):
    path = tmp_path / "nosizes.txt"
    path.write_text("\n".join(l for l in RESNET.read_text().splitlines()
                              if "Allreduce" not in l) + "\n")
    ready = readiness(load_trace(path))
    assert ready.gradients == ()
    assert ready.layers[0].name == "predictions" and ready.layers[-1].name == "conv1_conv"
    assert ready.layers[0].nbytes is None


def test_fallback_and_applied_twice(tmp_path):
    trace_lines = [
        "model/emb/embedding_lookup",
        "model/dense/MatMul",
        "gradient_tape/model/dense/MatMul_1",            # first application
        "gradient_tape/model/norm/batchnorm/mul/Sum",   # no producer pattern: fallback
        "gradient_tape/model/dense/MatMul_3",            # second application
        "gradient_tape/model/dense/BiasAdd/BiasAddGrad",
        "gradient_tape/model/norm/batchnorm/sub/Sum",
    ]
    (tmp_path / "t.txt").write_text("\n".join(trace_lines) + "\n")
    sizes = [{"name": "dense/kernel:0", "shape": [4, 4], "dtype": "float32"},
             {"name": "dense/bias:0", "shape": [4], "dtype": "float32"},
             {"name": "norm/gamma:0", "shape": [4], "dtype": "float16"}]
    (tmp_path / "t.sizes.json").write_text(json.dumps(sizes))
    ready = readiness(load_trace(tmp_path / "t.txt"))
    got = [(g.name, g.source, g.op_name.rsplit("/", 1)[-1]) for g in ready.gradients]
    assert got == [("dense/kernel:0", "producer", "MatMul_3"),
                   ("dense/bias:0", "producer", "BiasAddGrad"),
                   ("norm/gamma:0", "fallback", "Sum")]
    assert ready.gradients[2].nbytes == 8


def test_multiprocess_horovod_names_without_sizes(tmp_path):
    lines = [
        "gradient_tape/m/d2/BiasAdd/BiasAddGrad",
        "DistributedGradientTape_Allreduce/cond_3/then/_0/HorovodAllreduce_gradient_tape_m_d2_BiasAdd_BiasAddGrad_0",
        "gradient_tape/m/d2/MatMul_1",
        "DistributedGradientTape_Allreduce/cond_2/then/_8/HorovodAllreduce_gradient_tape_m_d2_MatMul_1_0",
        "gradient_tape/m/d1/MatMul_1",
        "gradient_tape/m/d1/BiasAdd/BiasAddGrad",
        "DistributedGradientTape_Allreduce/cond_1/then/_16/HorovodAllreduce_x_0",
        "DistributedGradientTape_Allreduce/cond/then/_24/HorovodAllreduce_y_0",
    ]
    (tmp_path / "t.txt").write_text("\n".join(lines))
    ready = readiness(load_trace(tmp_path / "t.txt"))
    assert [g.name for g in ready.gradients] == [f"variable[{n}]" for n in (3, 2, 1, 0)]
    assert ready.total_bytes is None
    assert [l.name for l in ready.layers] == ["d2", "d1"]


def test_sizes_length_must_match_cond_indices(tmp_path):
    sizes = json.loads(RESNET_SIZES.read_text())[:-1]
    bad = tmp_path / "short.json"
    bad.write_text(json.dumps(sizes))
    with pytest.raises(SizesError) as err:
        load_trace(RESNET, LoadOptions(sizes=str(bad)))
    assert str(err.value).startswith(f"{bad}:1: has 213 variables")


def test_detection_reads_the_whole_list(tmp_path):
    """A first step's list opens with hundreds of scope-less placeholder names."""
    placeholders = [f"resnet50_conv{k}_bn_readvariableop_{k}_resource" for k in range(600)]
    path = tmp_path / "first_step.txt"
    path.write_text("\n".join(placeholders) + "\n" + RESNET.read_text())
    doc = json.loads(run("inspect", path, "--sizes", RESNET_SIZES, "--json").stdout)
    assert doc["trace"]["format"] == "tf-schedule" and len(doc["gradients"]) == 214
    prose = tmp_path / "prose.txt"
    prose.write_text("\n".join(placeholders) + "\nthis line is prose, not a node\n")
    assert_error(run("inspect", prose), f"{prose}:1:", "cannot tell the trace format")


def test_flat_layer_finder_agrees_with_its_definition():
    """The bound finder for flat (Keras) layer names answers as _Layers.of does."""
    import random

    from tracecli.parsers import tf_schedule as tf

    rng = random.Random(3)
    parts = ["model", "dense", "conv1", "", "x", "MatMul", "gradient_tape"]
    for _ in range(5_000):
        model = rng.choice(["model", "", None, "x"])
        known = set(rng.sample(["dense", "conv1", "x", "", "model"], rng.randint(1, 3)))
        layers = tf._Layers(model, known)
        if layers.depth != 1:
            continue
        comps = [rng.choice(parts) for _ in range(rng.randint(1, 5))]
        assert layers.of(comps) == tf._Layers.of(layers, comps), (model, known, comps)
