"""Real profiler traces of Megatron-Core's DistributedDataParallel (2 gloo ranks, CPU, torch
2.13, megatron-core 0.16.1; ``fixtures/megatron/generate_megatron.py``): ``observed`` and
``--strategy megatron`` both give the buckets Megatron recorded in the same run."""

from __future__ import annotations

import json

import pytest

from tracecli import load_trace
from tracecli.model import CollectiveKind
from tracecli.pipeline import ComputeRequest, CostRequest, plan_trace
from tracecli.planning.strategies.megatron import MegatronOptions, megatron_buckets

from conftest import FIXTURES

MEGATRON = FIXTURES / "megatron"
CASES = ["overlap", "distopt", "default"]


def answers(case: str) -> dict:
    return json.loads((MEGATRON / f"{case}.megatron.json").read_text())


def recorded(case: str) -> list[tuple[frozenset, int]]:
    """Megatron's buckets in the order its last profiled step started them: (parameter
    names, elements of grad_data, padding included)."""
    a = answers(case)
    return [(frozenset(b["params"]), b["numel"]) for k in a["started"]
            for b in a["bucket_groups"][k]]


def options(case: str) -> dict:
    c = answers(case)["ddp_config"]
    return dict(megatron_overlap_grad_reduce=c["overlap_grad_reduce"],
                           megatron_bucket_size=c["bucket_size"] or 0,
                           megatron_distributed_optimizer=c["use_distributed_optimizer"])


def buckets_of(plan) -> list[tuple[frozenset, int]]:
    return [(frozenset(plan.tensor_names(b.index)), b.nbytes // 4) for b in plan.buckets]


def kind(case: str) -> CollectiveKind:
    return (CollectiveKind.REDUCE_SCATTER if answers(case)["ddp_config"]["use_distributed_optimizer"]
            else CollectiveKind.ALL_REDUCE)


@pytest.mark.parametrize("case", CASES)
def test_the_trace_records_megatrons_reductions(case):
    trace = load_trace(MEGATRON / f"{case}.json.gz")
    grads = [c for c in trace.collectives() if c.purpose == "gradients" and c.step == trace.step.index]
    # a reduce-scatter's recorded size is its whole (padded) input
    assert [(c.kind, c.elements, c.dtype) for c in grads] == \
        [(kind(case), n, "float32") for _, n in recorded(case)]


@pytest.mark.parametrize("case", CASES)
def test_observed_is_what_megatron_did(case):
    planned = plan_trace(load_trace(MEGATRON / f"{case}.json.gz"), "observed", {},
                         ComputeRequest(), CostRequest(gpus=2))
    plan = planned.plan
    assert plan.measured and not plan.notes
    assert buckets_of(plan) == recorded(case)
    assert {b.collective for b in plan.buckets} == {kind(case)}


@pytest.mark.parametrize("case", CASES)
def test_the_megatron_strategy_reproduces_the_run(case):
    planned = plan_trace(load_trace(MEGATRON / f"{case}.json.gz"), "megatron", options(case),
                         ComputeRequest(), CostRequest(gpus=answers(case)["dp"]))
    plan = planned.plan
    assert buckets_of(plan) == recorded(case)
    assert {b.collective for b in plan.buckets} == {kind(case)}
    if not answers(case)["ddp_config"]["overlap_grad_reduce"]:  # after backward
        assert all(b.start_ms >= max(g.ready_ms for g in plan.inp.grads) for b in plan.buckets)


def test_the_sidecar_carries_the_shared_embedding():
    assert answers("distopt")["shared_embedding"] == ["word_embeddings.weight"]
    trace = load_trace(MEGATRON / "distopt.json.gz")
    planned = plan_trace(trace, "megatron", options("distopt"), ComputeRequest(), CostRequest(gpus=2))
    shared = [g.name for g in planned.plan.inp.grads if g.shared_embedding]
    assert shared == ["word_embeddings.weight"]
    # without the mark, Megatron's rule would have kept it with hidden.0's parameters
    unmarked = [g._replace(shared_embedding=False) for g in planned.plan.inp.grads]
    assert len(megatron_buckets(unmarked, MegatronOptions(**options("distopt")), 2)) == len(recorded("distopt")) - 1


def test_without_the_sidecar_readiness_stands_for_the_order_and_the_plan_says_so(tmp_path):
    # a copy away from its sidecar: shapes but no names, so no named_parameters() order
    path = tmp_path / "overlap.json.gz"
    path.write_bytes((MEGATRON / "overlap.json.gz").read_bytes())
    planned = plan_trace(load_trace(path), "megatron", options("overlap"), ComputeRequest(),
                         CostRequest(gpus=2))
    plan = planned.plan
    assert not any(g.order_known for g in plan.inp.grads)
    assert any("no place in the model's named_parameters() order" in n for n in plan.notes)
    # this model's backward runs in the reverse of its parameter order: the same buckets
    assert [b.nbytes // 4 for b in plan.buckets] == [n for _, n in recorded("overlap")]
    named = plan_trace(load_trace(MEGATRON / "overlap.json.gz"), "megatron", options("overlap"),
                       ComputeRequest(), CostRequest(gpus=2)).plan
    assert not named.notes


def test_replay_runs_megatrons_padded_reduce_scatters():
    pytest.importorskip("torch")
    from conftest import run
    result = run("replay", MEGATRON / "distopt.json.gz", "--strategy", "megatron",
                 "--megatron-overlap-grad-reduce", "--megatron-bucket-size", "20000",
                 "--megatron-distributed-optimizer", "--gpus", "2", "--iters", "2", "--warmup", "1",
                 "--network", "10gbe", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["replay"]["verified"]  # every rank holds its exact shard
    assert [(b["collective"], b["bytes"] // 4) for b in doc["buckets"]] == \
        [("reduce_scatter", n) for _, n in recorded("distopt")]
