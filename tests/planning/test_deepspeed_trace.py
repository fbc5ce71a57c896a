"""A real profiler trace of DeepSpeed ZeRO-2 (2 gloo ranks, CPU, torch 2.13, DeepSpeed 0.19.8;
``fixtures/deepspeed/generate_deepspeed.py``): ``observed`` and ``--strategy deepspeed`` both
give the flushes DeepSpeed recorded in the same run."""

from __future__ import annotations

import json

from tracecli import load_trace
from tracecli.model import CollectiveKind
from tracecli.pipeline import ComputeRequest, CostRequest, plan_trace

from conftest import FIXTURES

DS = FIXTURES / "deepspeed"
RECORD = json.loads((DS / "ds_zero2.deepspeed.json").read_text())


def recorded() -> list[tuple[frozenset, int]]:
    return [(frozenset(f["params"]), f["elements"]) for f in RECORD["flushes"]]


def buckets_of(plan) -> list[tuple[frozenset, int]]:
    return [(frozenset(plan.tensor_names(b.index)), b.nbytes // 4) for b in plan.buckets]


def test_the_record_is_a_zero2_run_of_three_flushes():
    assert RECORD["config"]["zero_optimization"]["stage"] == 2 and len(RECORD["flushes"]) == 3


def test_observed_is_what_deepspeed_did():
    """The last flush is DeepSpeed's epilogue, launched after backward: matched because its
    elements are exactly the remaining ready gradients'."""
    plan = plan_trace(load_trace(DS / "ds_zero2.json.gz"), "observed", {},
                      ComputeRequest(), CostRequest(gpus=2)).plan
    assert plan.measured
    assert buckets_of(plan) == recorded()
    assert {b.collective for b in plan.buckets} == {CollectiveKind.ALL_REDUCE}


def test_the_deepspeed_strategy_reproduces_the_run():
    zero = RECORD["config"]["zero_optimization"]
    opts = dict(deepspeed_stage=zero["stage"],
                           deepspeed_reduce_bucket_size=zero["reduce_bucket_size"],
                           deepspeed_overlap_comm=str(zero["overlap_comm"]).lower())
    plan = plan_trace(load_trace(DS / "ds_zero2.json.gz"), "deepspeed", opts, ComputeRequest(),
                      CostRequest(gpus=RECORD["world_size"])).plan
    assert buckets_of(plan) == recorded()
    # a flush leaves in the hook of the gradient that would pass the size: never before
    # that gradient is ready, and the last at the end of backward
    end = max(g.ready_ms for g in plan.inp.grads)
    assert plan.buckets[-1].start_ms >= end
