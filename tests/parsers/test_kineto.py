"""PyTorch profiler (Kineto) traces against torch's own answers from the same runs.

The fixtures come from ``tests/fixtures/kineto/generate.py``: DDP on 2 gloo ranks, torch
2.13 on CPU (the ``_cuda`` ones: one NCCL rank on an H100, torch 2.11, the device's kernels in
the trace). Beside each trace, ``NAME.torch.json`` holds what torch itself said in that
run: the order ``register_post_accumulate_grad_hook`` saw gradients become ready,
``named_parameters()``, and DDP's rebuilt buckets from ``_get_ddp_logging_data()``.
"""

from __future__ import annotations

import gzip
import json
import shutil

import networkx as nx
import pytest

from tracecli import load_trace, readiness
from tracecli.analysis.observed import observed_run
from tracecli.errors import PlanError
from tracecli.model import CollectiveKind
from tracecli.pipeline import ComputeRequest, CostRequest, plan_trace

from conftest import FIXTURES, SAMPLES, assert_error, run

KINETO = FIXTURES / "kineto"
GPU_SAMPLE = SAMPLES / "resnet50_ddp_nccl_2xa100.json.gz"
MiB = 1024 * 1024
REBUILT = ["mlp_default", "mlp_cap1", "convbn_cap", "mixed_bf16", "tied_lm", "mlp_default_cuda"]


def answers(case: str) -> dict:
    return json.loads((KINETO / f"{case}.torch.json").read_text())


def trace_of(case: str, tmp_path=None, sidecar: bool = True):
    path = KINETO / f"{case}.json.gz"
    if not sidecar:  # a copy away from its sidecar
        path = shutil.copy(path, tmp_path / f"{case}.json.gz")
    return load_trace(path)


def torch_buckets(case: str) -> list[set[int]]:
    """DDP's rebuilt buckets as sets of readiness positions (from torch's own hook order)."""
    a = answers(case)
    names = [p["name"] for p in a["named_parameters"]]
    position = {name: k for k, name in enumerate(a["ready_order"])}
    return [{position[names[int(i)]] for i in bucket.split()}
            for bucket in a["ddp"]["rebuilt_per_bucket_param_indices"].split(", ")]


def torch_sizes(case: str) -> list[int]:
    return [int(n) for n in answers(case)["ddp"]["rebuilt_bucket_sizes"].split(", ")]


NAMED = sorted(p.name.removesuffix(".torch.json") for p in KINETO.glob("*.torch.json")
               if p.name not in ("mlp_noshapes.torch.json", "unused.torch.json"))


@pytest.mark.parametrize("case", NAMED)
def test_every_gradient_is_named_as_torch_readied_it(case):
    """Shapes repeat in every one of these models (two Linear biases of 1,024, a ResNet's
    BatchNorms, a transformer's layers): each gradient still gets its parameter, by the
    order rule of ``parsers/kineto_names.py``, exactly as torch recorded readiness."""
    a = answers(case)
    ready = readiness(trace_of(case))
    params = {p["name"]: p for p in a["named_parameters"]}
    assert [g.name for g in ready.gradients] == a["ready_order"]
    for g in ready.gradients:
        if g.shape is not None:
            assert list(g.shape) == params[g.name]["shape"] and g.dtype == params[g.name]["dtype"]


def test_an_unused_parameter_of_a_repeated_shape_is_truly_ambiguous():
    """``unused``: two gradients of [64] float32 for three parameters of that shape (one
    unused this step): which two is not in the trace; those keep positional names, the note
    says which shape, and the rest are named."""
    ready = readiness(trace_of("unused"))
    a = answers("unused")
    for g, name in zip(ready.gradients, a["ready_order"]):
        assert g.name == name or g.name.startswith(f"grad{g.ready_index}[")
    assert sum(g.name.startswith("grad") for g in ready.gradients) == 2
    notes = " ".join(trace_of("unused").meta.notes)
    assert "come in other numbers than the sidecar's" in notes and "[64] float32" in notes


def test_repeated_shapes_are_named_by_order_and_the_trace_says_so():
    ready = readiness(trace_of("mlp_default"))
    # 0.bias and 2.bias are both [1024] float32: named by the order rule
    assert [g.name for g in ready.gradients][4:7] == ["2.bias", "2.weight", "0.bias"]
    notes = " ".join(trace_of("mlp_default").meta.notes)
    assert "8 of 8 gradients (2 by order among parameters of one shape and dtype" in notes


def test_without_sidecar_names_are_position_and_shape(tmp_path):
    ready = readiness(trace_of("convbn_cap", tmp_path, sidecar=False))
    assert ready.gradients[0].name == "grad0[10]" and ready.gradients[4].name == "grad4[32,16,3,3]"


def ddp_options(case: str) -> dict:
    mb = answers(case)["ddp_kwargs"].get("bucket_cap_mb")
    return dict(max_bytes=None if mb is None else int(mb * MiB))


@pytest.mark.parametrize("case", REBUILT)
def test_ddp_strategy_reproduces_the_buckets_ddp_used(case):
    planned = plan_trace(trace_of(case), "ddp", ddp_options(case), ComputeRequest(), CostRequest())
    buckets = planned.plan.buckets
    assert [set(b.members) for b in buckets] == torch_buckets(case)
    assert [b.nbytes for b in buckets] == torch_sizes(case)


@pytest.mark.parametrize("case", REBUILT)
def test_observed_plan_is_what_ddp_used(case):
    if case.endswith("_cuda"):  # one NCCL rank: its all-reduces run no kernel to time
        with pytest.raises(PlanError, match="one rank, whose all-reduces move nothing"):
            plan_trace(trace_of(case), "observed", {}, ComputeRequest(), CostRequest())
        return
    planned = plan_trace(trace_of(case), "observed", {}, ComputeRequest(),
                         CostRequest())
    plan = planned.plan
    assert plan.measured and not plan.notes
    assert [set(b.members) for b in plan.buckets] == torch_buckets(case)
    assert [b.nbytes for b in plan.buckets] == torch_sizes(case)
    for b in plan.buckets:  # measured: launched when ready, ran after the launch
        assert b.ready_ms <= b.start_ms <= b.end_ms


def test_observed_without_shapes_uses_launch_order():
    trace = trace_of("mlp_noshapes")
    run_ = observed_run(trace, readiness(trace))
    assert not run_.by_sizes
    assert [set(b.members) for b in run_.buckets] == torch_buckets("mlp_noshapes")


def test_find_unused_parameters_is_reported_not_guessed():
    trace = trace_of("unused")
    run_ = observed_run(trace, readiness(trace))
    assert all(b.members is None for b in run_.buckets)
    assert "find_unused_parameters" in run_.problems[0]
    purposes = [c.purpose for c in trace.collectives() if c.step == trace.step.index]
    assert purposes == ["gradients"] * 3 + ["unused-map"]
    unused_map = [c for c in trace.collectives() if c.purpose == "unused-map"][0]
    assert unused_map.elements == len(answers("unused")["named_parameters"])
    assert unused_map.dtype == "int32"
    sizes = [c.nbytes for c in trace.collectives()
             if c.purpose == "gradients" and c.step == trace.step.index]
    assert sizes == [int(n) for n in answers("unused")["ddp"]["bucket_sizes"].split(", ")]
    # the plan resolves them by DDP's own construction rule, where that rule gives exactly
    # the run's buckets, in order and bytes (issue 24): not a guess
    result = run("plan-buckets", KINETO / "unused.json.gz", "--strategy", "observed", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert "notes" not in doc
    assert [b["tensors"] for b in doc["buckets"]] == [["head.bias", "head.weight"], ["grad2[64]"],
                                                     ["grad3[64,64]"]]
    assert [b["bytes"] for b in doc["buckets"]] == sizes


def test_buffers_broadcast_in_forward():
    trace = trace_of("convbn_cap")
    kinds = {(c.kind, c.purpose) for c in trace.collectives()}
    assert (CollectiveKind.BROADCAST, "buffers") in kinds


def test_gpu_sample_collectives_and_as_run():
    trace = load_trace(GPU_SAMPLE)
    assert trace.step.label == "ProfilerStep#6" and trace.step.world_size == 2
    assert trace.meta.backend == "nccl"
    assert len(trace.parameters()) == 161 and all(t.nbytes is None for t in trace.parameters())
    for step in (4, 5, 6):
        sizes = [c.elements for c in trace.collectives() if c.step == step and c.purpose == "gradients"]
        assert sizes == [2_049_000, 7_875_584, 6_563_840, 6_637_568, 2_431_040]
        assert [c.purpose for c in trace.collectives() if c.step == step][:2] == ["buffers"] * 2
    for c in trace.collectives():  # each kernel ran after its launch and before the next step ends
        assert c.launch_ms <= c.start_ms < c.end_ms
    planned = plan_trace(trace, "observed", {}, ComputeRequest(), CostRequest())
    counts = [len(b.members) for b in observed_run(trace, readiness(trace)).buckets]
    assert sum(counts) == 161 and counts[0] == 2  # fc.bias, fc.weight: DDP's 1 MiB first bucket
    assert [b.nbytes for b in planned.plan.buckets] == [4 * n for n in (2_049_000, 7_875_584, 6_563_840, 6_637_568, 2_431_040)]
    assert planned.cost.name == "trace" and planned.cost.describe()["fit"]["points"] == 15


def test_step_option(tmp_path):
    doc = json.loads(run("inspect", KINETO / "mlp_default.json.gz", "--step", "3", "--json").stdout)
    assert doc["step"]["label"] == "ProfilerStep#3" and doc["step"]["steps"] == ["ProfilerStep#3", "ProfilerStep#4"]
    assert_error(run("inspect", KINETO / "mlp_default.json.gz", "--step", "9"),
                 str(KINETO / "mlp_default.json.gz"), "ProfilerStep#9", "ProfilerStep#3, ProfilerStep#4")
    from conftest import VGG
    assert_error(run("inspect", VGG, "--step", "1"), str(VGG), "--step")


def test_inspect_json_contract():
    result = run("inspect", GPU_SAMPLE, "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["trace"]["format"] == "kineto"
    c = doc["collectives"][2]
    assert set(c) >= {"step", "kind", "elements", "bytes", "dtype", "start_ms", "end_ms", "purpose"}
    assert (c["kind"], c["purpose"], c["elements"], c["dtype"]) == ("allreduce", "gradients", 2_049_000, "float32")
    assert doc["gradients"][0]["bytes"] is None and doc["gradients"][0]["ready_ms"] > 0
    text = run("inspect", GPU_SAMPLE).stdout
    assert "record_shapes=True" in text and "Collectives of the run" in text


def test_plan_needs_sizes_and_says_how(tmp_path):
    assert_error(run("plan-buckets", GPU_SAMPLE, "--strategy", "ddp"), str(GPU_SAMPLE),
                 "record_shapes=True")


def test_compare_shows_the_run_first():
    doc = json.loads(run("plan-buckets", KINETO / "mlp_cap1.json.gz", "--compare", "--json").stdout)
    rows = doc["compare"]
    assert rows[0]["label"] == "as run (measured)" and rows[0]["measured"] is True
    assert rows[1]["label"] == "as run (model)" and rows[0]["vs_as_run_pct"] == 0
    assert all("vs_as_run_pct" in r for r in rows)
    predicted = [r["iteration_ms"] for r in rows[2:]]
    assert predicted == sorted(predicted)


def test_cost_model_fitted_to_the_trace_unless_given():
    doc = json.loads(run("plan-buckets", KINETO / "mlp_cap1.json.gz", "--json").stdout)
    assert doc["cost_model"]["name"] == "trace" and doc["cost_model"]["fit"]["points"] == 6
    assert doc["gpus"] == 2  # the trace's world size
    torch_sizes = answers("mlp_cap1")["ddp"]["rebuilt_bucket_sizes"].split(", ")
    assert doc["cost_model"]["measured_sizes"] == sorted(int(n) for n in torch_sizes)
    doc = json.loads(run("plan-buckets", KINETO / "mlp_cap1.json.gz", "--strategy", "ddp",
                         "--max-bytes", "1M", "--json").stdout)  # the run's own buckets
    assert [b["cost_basis"] for b in doc["buckets"]] == ["measured"] * 3
    doc = json.loads(run("plan-buckets", KINETO / "mlp_cap1.json.gz", "--network", "ib-hdr", "--json").stdout)
    assert doc["cost_model"]["name"] == "ib-hdr"
    result = run("plan-buckets", KINETO / "tied_lm.json.gz", "--json")  # one bucket size
    assert result.exit_code == 0 and "too few to fit" in result.stderr
    assert json.loads(result.stdout)["cost_model"]["name"] == "nvlink-h100"


def test_measured_compute_profile():
    trace = trace_of("mlp_default")
    planned = plan_trace(trace, "single", {}, ComputeRequest(), CostRequest())
    inp = planned.inp
    assert inp.forward_ms == pytest.approx(trace.step.backward_start_ms)
    assert inp.backward_end_ms == pytest.approx(trace.step.backward_end_ms)
    assert inp.update_ms == pytest.approx(trace.step.update_ms)
    ops = {op.id: op for op in trace.ops()}
    ready = readiness(trace)
    for g, grad in zip(ready.gradients, inp.grads):  # ready when its AccumulateGrad ended
        assert grad.ready_ms == pytest.approx(ops[g.op].start_ms + ops[g.op].dur_ms)


def test_export_kineto(tmp_path):
    out = tmp_path / "g.json"
    assert run("export", KINETO / "convbn_cap.json.gz", "--to", "json", "-o", out).exit_code == 0
    data = json.loads(out.read_text())
    try:
        graph = nx.node_link_graph(data, edges="links")
    except TypeError:  # networkx < 3.4
        graph = nx.node_link_graph(data)
    kinds = {d["kind"] for _, _, d in graph.edges(data=True)}
    assert {"gradient", "backward_of", "launch"} <= kinds
    assert any(d.get("type") == "collective" for _, d in graph.nodes(data=True))
    gml = tmp_path / "g.graphml"
    assert run("export", GPU_SAMPLE, "--to", "graphml", "-o", gml).exit_code == 0
    assert nx.read_graphml(gml).number_of_nodes() > 161


HOSTILE = [
    ("not json", b"{this is not json", ["invalid JSON"]),
    ("no events", b'{"schemaVersion": 1}', ["traceEvents"]),
    ("events not list", b'{"traceEvents": {"a": 1}}', ["list"]),
    ("event not object", b'{"traceEvents": [1, 2]}', ["JSON object"]),
    ("nan ts", b'{"traceEvents": [\n{"ph": "X", "cat": "cpu_op", "name": "a", "ts": NaN, "dur": 1}]}', ["NaN"]),
    ("negative dur", b'{"traceEvents": [\n{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": -5}]}', ["non-negative"]),
    ("string ts", b'{"traceEvents": [\n{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "1", "dur": 1}]}', ["number"]),
    ("bad dims", b'{"traceEvents": [\n{"ph": "X", "cat": "cpu_op", "name": "torch::autograd::AccumulateGrad", '
                 b'"ts": 1, "dur": 1, "args": {"Input Dims": [[-3]]}}]}', ["Input Dims"]),
    ("huge int", b'{"traceEvents": [\n{"ph": "X", "ts": ' + b"9" * 5000 + b"}]}", ["invalid JSON"]),
    ("duplicate key", b'{"traceEvents": [\n{"ph": "X", "ph": "Y"}]}', ["duplicate"]),
    ("extra data", b'{"traceEvents": []} {}', ["extra data"]),
]


@pytest.mark.parametrize("data,words", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_json(tmp_path, data, words):
    path = tmp_path / "t.json"
    path.write_bytes(data)
    assert_error(run("inspect", path), str(path), *words)


def test_truncated_and_garbage_gzip(tmp_path):
    data = (KINETO / "mlp_default.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    assert_error(run("inspect", cut), str(cut), "truncated")
    garbage = tmp_path / "bad.json.gz"
    garbage.write_bytes(b"\x1f\x8b" + bytes(range(200)))
    assert_error(run("inspect", garbage), str(garbage))
    plain = tmp_path / "cut.json"
    plain.write_bytes(gzip.decompress(data)[:5000])
    assert_error(run("inspect", plain), f"{plain}:", "invalid JSON")


def test_replay_kineto_observed_and_ddp():
    pytest.importorskip("torch")
    result = run("replay", KINETO / "mlp_cap1.json.gz", "--strategy", "observed", "--gpus", "2",
                 "--iters", "2", "--warmup", "1", "--network", "10gbe", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["replay"]["verified"] and [b["bytes"] for b in doc["buckets"]] == torch_sizes("mlp_cap1")
    assert doc["compute"]["source"].startswith("measured in the trace")
