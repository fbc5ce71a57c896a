"""inspect --json rows written from their records are the text the dicts encode to."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tracecli import load_trace, readiness, size_report
from tracecli.analysis.readiness import GradientReady, LayerReady, Readiness
from tracecli.pipeline import ComputeRequest, gradient_details
from tracecli.render import jsonout, jsonrows

from conftest import FIXTURES, RESNET, SAMPLES, VGG

AWKWARD = st.text(alphabet=st.sampled_from(list('a/_:"\\\x00\x1f\x7f é\u2028😀,{}[]')), max_size=8)
OPTIONAL_INT = st.none() | st.integers(0, 1 << 70)


@st.composite
def readiness_records(draw):
    grads = tuple(
        GradientReady(f"v{k}", draw(AWKWARD), draw(OPTIONAL_INT), draw(st.none() | AWKWARD),
                      draw(OPTIONAL_INT), draw(st.none() | st.sampled_from(["float32", "bf16é"])),
                      draw(st.none() | st.tuples() | st.tuples(st.integers(0, 9), st.integers(0, 1 << 40))),
                      k, draw(st.integers(0, 1 << 40)), draw(AWKWARD), draw(st.none() | AWKWARD),
                      draw(st.none() | AWKWARD), draw(st.booleans()))
        for k in range(draw(st.integers(0, 6))))
    layers = tuple(
        LayerReady(draw(AWKWARD), k, draw(st.integers(0, 99)),
                   tuple(draw(st.lists(AWKWARD, max_size=3))), draw(OPTIONAL_INT), draw(OPTIONAL_INT))
        for k in range(draw(st.integers(0, 4))))
    return Readiness(grads, layers, (), "test")


TIMES = st.none() | st.integers(0, 1 << 53) | st.floats(allow_nan=False, allow_infinity=False)


def _dict_rows(rows: list) -> list[str]:
    return [json.dumps(row, ensure_ascii=False, allow_nan=False) for row in rows]


def _gradient_dicts(ready: Readiness, extra: dict) -> list[dict]:
    """The gradient entries of the inspect --json document, as its contract spells them."""
    return [{
        "name": g.name,
        "layer": g.layer,
        "bytes": g.nbytes,
        "ready_index": g.ready_index,
        "elements": g.elements,
        "dtype": g.dtype,
        "shape": list(g.shape) if g.shape is not None else None,
        "backward_position": g.backward_position,
        "ready_source": g.source,
        "ready_op": g.op_name,
        "sparse": g.sparse,
        **extra.get(g.tensor_id, {}),  # a key given twice keeps its first place
    } for g in ready.gradients]


def _layer_dicts(ready: Readiness) -> list[dict]:
    """The layer entries; cumulative bytes are null from the first layer of unknown size."""
    layers, cumulative = [], 0
    for layer in ready.layers:
        known = layer.nbytes is not None and cumulative is not None
        cumulative = cumulative + layer.nbytes if known else None
        layers.append({
            "name": layer.name,
            "params": layer.elements,
            "bytes": layer.nbytes,
            "ready_index": layer.ready_index,
            "backward_position": layer.backward_position,
            "tensors": list(layer.tensors),
            "cumulative_bytes": cumulative,
        })
    return layers


@settings(max_examples=300, deadline=None)
@given(readiness_records(), st.data())
def test_rows_from_records_equal_encoded_dicts(ready, data):
    extra = {}
    if data.draw(st.booleans()):
        extra = {g.tensor_id: {"shape": data.draw(st.none() | st.lists(st.integers(0, 99), max_size=3)),
                               "ready_ms": data.draw(TIMES)} for g in ready.gradients}
    rows = jsonrows.gradient_rows(ready, extra)
    assert rows is not None
    assert list(rows) == _dict_rows(_gradient_dicts(ready, extra))
    layers = jsonrows.layer_rows(ready)
    assert layers is not None
    assert list(layers) == _dict_rows(_layer_dicts(ready))


def test_values_the_templates_do_not_know_fall_back_to_the_dicts():
    g = GradientReady("v0", "w", 4, "l", 1, "float32", (1,), 0, 1, "s", "op0", "Op", False)
    ready = Readiness((g,), (), (), "test")
    assert jsonrows.gradient_rows(ready, {}) is not None
    assert jsonrows.gradient_rows(Readiness((g._replace(nbytes=True),), (), (), "t"), {}) is None
    assert jsonrows.gradient_rows(Readiness((g._replace(sparse=1),), (), (), "t"), {}) is None
    assert jsonrows.gradient_rows(ready, {"v0": {"shape": None, "ready_ms": float("nan")}}) is None
    assert jsonrows.gradient_rows(ready, {"v0": {"ready_ms": 1.0, "shape": None}}) is None
    assert jsonrows.gradient_rows(ready, {"v1": {"shape": None, "ready_ms": 1.0}}) is None


def test_inspect_json_is_the_encoded_document_on_the_samples():
    kineto = sorted((FIXTURES / "kineto").glob("*.json.gz"))[:2]
    for path in (VGG, RESNET, FIXTURES / "mlp_chainer.txt", SAMPLES / "resnet50_ddp_nccl_2xa100.json.gz",
                 *kineto):
        trace = load_trace(path)
        ready = readiness(trace)
        sizes = size_report(trace, ready)
        for compute in (ComputeRequest(), ComputeRequest(backward_ms=100.0)):
            details, source = gradient_details(trace, ready, compute)
            text = jsonout.inspect_json(trace, ready, sizes, details, source)
            doc = json.loads(text)  # its rows replaced by the dicts built here, encoded again
            doc["gradients"], doc["layers"] = _gradient_dicts(ready, details or {}), _layer_dicts(ready)
            assert text == jsonout.dumps(doc)
