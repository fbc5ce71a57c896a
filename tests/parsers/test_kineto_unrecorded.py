"""A profiler trace where one AccumulateGrad records no tensor (``Input Dims [[]]``,
``Input type ['']``) while the others have shapes (issue 17 item 1).

``fixtures/kineto/fused_embed`` is real: ``generate.py``'s ``fused_embed`` case, a DLRM-like
model whose embedding table is updated inside backward by a fused optimizer (as TorchRec's
FBGEMM tables are) and so gets an undefined gradient; torch 2.13 records its AccumulateGrad
without a tensor, and DDP all-reduces zeros in its place (torch's answers beside it)."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from tracecli import load_trace
from tracecli.analysis.readiness import readiness
from tracecli.pipeline import ComputeRequest, CostRequest, plan_trace

from conftest import run
from test_kineto import KINETO, answers, ddp_options, torch_buckets, torch_sizes

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="replay and calibrate need torch (the replay extra)")

CASE = "fused_embed"


@pytest.fixture
def lone(tmp_path):
    """The trace away from its sidecar."""
    return str(shutil.copy(KINETO / f"{CASE}.json.gz", tmp_path / f"{CASE}.json.gz"))


def test_the_fixture_is_the_real_case():
    a = answers(CASE)
    assert a["torch"].startswith("2.13") and "table" in a["ready_order"]


def test_unrecorded_gradient_is_unknown_and_said_so(lone):
    ready = readiness(load_trace(lone))
    g = ready.gradients[answers(CASE)["ready_order"].index("table")]
    assert g.shape is None and g.nbytes is None and g.name == "grad4"
    result = run("inspect", lone)
    assert result.exit_code == 0, result.output
    assert "sizes: known for 8 of 9 gradients" in result.stdout
    assert "records no shapes" not in result.stdout and "grad4[]" not in result.stdout


@pytest.mark.parametrize("args", [(), ("--strategy", "ddp"), ("--strategy", "optimal"),
                                  ("--strategy", "horovod"), ("--compare",)])
def test_plans_the_known_gradients_and_says_which_were_left_out(lone, args):
    result = run("plan-buckets", lone, *args)
    assert result.exit_code == 0, result.output
    assert "planned 8 of 9 gradients; left out 1 whose size is unknown (grad4)" in result.stderr
    assert "--sizes FILE" in result.stderr


@needs_torch
def test_replay_dry_run_says_which_were_left_out(lone):
    result = run("replay", lone, "--dry-run", "--gpus", "2")
    assert result.exit_code == 0, result.output
    assert "left out 1 whose size is unknown (grad4)" in result.stderr


def test_observed_plan_without_the_size_keeps_the_run_s_buckets(lone):
    plan = plan_trace(load_trace(lone), "observed", {}, ComputeRequest(),
                      CostRequest()).plan
    assert [b.nbytes for b in plan.buckets] == torch_sizes(CASE)


def test_sidecar_fills_the_unrecorded_gradient():
    trace = load_trace(KINETO / f"{CASE}.json.gz")  # the sidecar beside it
    a = answers(CASE)
    params = {p["name"]: p for p in a["named_parameters"]}
    ready = readiness(trace)
    assert [g.name for g in ready.gradients] == a["ready_order"]
    for g in ready.gradients:
        assert list(g.shape) == params[g.name]["shape"]
    assert "took the size of the sidecar's only parameter" in " ".join(trace.meta.notes)
    planned = plan_trace(trace, "ddp", ddp_options(CASE), ComputeRequest(), CostRequest())
    assert [set(b.members) for b in planned.plan.buckets] == torch_buckets(CASE)
    assert [b.nbytes for b in planned.plan.buckets] == torch_sizes(CASE)
    observed = plan_trace(trace, "observed", {}, ComputeRequest(),
                          CostRequest()).plan
    assert [set(b.members) for b in observed.buckets] == torch_buckets(CASE)


def test_sizes_option_fills_it_too(lone):
    result = run("plan-buckets", lone, "--sizes", str(KINETO / f"{CASE}.sizes.json"))
    assert result.exit_code == 0, result.output
    assert "left out" not in result.stderr and "9 gradients (190.4 KiB)" in result.stdout


def test_collective_sizes_only_on_the_cpu_op_still_match_ddp():
    """Issue 17 item 2. ``mlp_cpu_sizes`` is ``mlp_default`` (real, torch 2.13, gloo) with the
    smallest edit: ``Input Dims``/``Input type`` removed from the ``gloo:all_reduce`` events
    (what ran, as a pre-2.2 NCCL kernel carries no collective args), so sizes are only on
    the launching CPU op ``c10d::allreduce_`` (a ``TensorList``). torch's answers are
    ``mlp_default``'s, copied."""
    trace = load_trace(KINETO / "mlp_cpu_sizes.json.gz")
    grads = [c for c in trace.collectives() if c.purpose == "gradients"]
    assert [c.elements for c in grads if c.step == trace.step.index] == \
        [b // 4 for b in torch_sizes("mlp_cpu_sizes")]
    observed = plan_trace(trace, "observed", {}, ComputeRequest(),
                          CostRequest()).plan
    assert [set(b.members) for b in observed.buckets] == torch_buckets("mlp_cpu_sizes")
    assert [b.nbytes for b in observed.buckets] == torch_sizes("mlp_cpu_sizes")


def test_pre_2_2_sizes_on_the_op_inside_the_launch():
    from tracecli.parsers.kineto_collectives import sized

    assert sized({"Input Dims": [[394241]], "Input type": ["float"]}) == (394241, "float32")
    assert sized({"Input Dims": [[[112], [226960]], []], "Input type": ["TensorList", ""]}) \
        == (227072, None)
