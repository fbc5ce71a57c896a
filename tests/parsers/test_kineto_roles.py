"""``parsers/kineto_roles.py`` against torch itself: each operator's own schema names its
arguments as the table says, and each layer, profiled, calls that operator inside its own
scope with its parameters at those positions."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import inspect  # noqa: E402

from tracecli.parsers.kineto_roles import LAYER_FILES, LAYER_OPS, layer_file  # noqa: E402

LAYERS = {
    "Linear": (lambda: torch.nn.Linear(6, 5), (3, 6)),
    "Conv1d": (lambda: torch.nn.Conv1d(2, 4, 3), (1, 2, 9)),
    "Conv2d": (lambda: torch.nn.Conv2d(2, 4, 3), (1, 2, 7, 7)),
    "Conv3d": (lambda: torch.nn.Conv3d(2, 4, 3), (1, 2, 5, 5, 5)),
    "ConvTranspose1d": (lambda: torch.nn.ConvTranspose1d(2, 4, 3), (1, 2, 9)),
    "ConvTranspose2d": (lambda: torch.nn.ConvTranspose2d(2, 4, 3), (1, 2, 7, 7)),
    "ConvTranspose3d": (lambda: torch.nn.ConvTranspose3d(2, 4, 3), (1, 2, 5, 5, 5)),
    "Embedding": (lambda: torch.nn.Embedding(11, 5), None),
}


def test_the_table_covers_these_layers():
    assert set(LAYER_OPS) == set(LAYERS) == set(LAYER_FILES)


@pytest.mark.parametrize("cls", sorted(LAYER_OPS))
def test_torch_defines_each_layer_s_forward_in_its_file(cls):
    source = inspect.getsourcefile(getattr(torch.nn, cls).forward).replace("\\", "/")
    assert source.endswith(f"/torch/nn/modules/{LAYER_FILES[cls]}.py")


@pytest.mark.parametrize("cls", sorted(LAYER_OPS))
def test_the_operator_s_schema_names_the_parameters(cls):
    op, roles = LAYER_OPS[cls]
    packet = getattr(torch.ops.aten, op.removeprefix("aten::"))
    for overload in packet.overloads():
        names = [a.name for a in getattr(packet, overload)._schema.arguments]
        assert all(names[j] == role for j, role in roles.items()), (overload, names)


@pytest.mark.parametrize("cls", sorted(LAYER_OPS))
def test_the_layer_calls_it_in_its_own_scope_with_its_parameters(cls, tmp_path):
    make, shape = LAYERS[cls]
    layer = make()
    assert type(layer).__name__ == cls
    x = torch.randint(0, 11, (4,)) if shape is None else torch.randn(*shape)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True, with_stack=True) as prof:
        layer(x)
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    scope = next(e for e in events if e.get("name") == f"nn.Module: {cls}_0")
    inside = [e for e in events if e.get("cat") == "cpu_op" and e["tid"] == scope["tid"]
              and scope["ts"] <= e["ts"] and e["ts"] + e["dur"] <= scope["ts"] + scope["dur"]]
    outermost = [e for e in inside if not any(o is not e and o["ts"] <= e["ts"] and
                                              e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in inside)]
    op, roles = LAYER_OPS[cls]
    assert [e["name"] for e in outermost] == [op]
    op_event = outermost[0]
    frames = [e for e in events if e.get("cat") == "python_function" and e["tid"] == scope["tid"]
              and layer_file(e["name"]) == LAYER_FILES[cls] and scope["ts"] <= e["ts"] <= op_event["ts"]
              and op_event["ts"] + op_event["dur"] <= e["ts"] + e["dur"]]
    assert len(frames) == 1  # torch's own forward, in the layer's scope, runs the operator
    dims = outermost[0]["args"]["Input Dims"]
    for j, role in roles.items():
        assert dims[j] == list(getattr(layer, role).shape)
