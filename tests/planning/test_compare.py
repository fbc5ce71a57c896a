"""compare: every strategy and each framework tuned, best first, with the framework defaults
added when the options given are not them. Through the public planning API."""

from __future__ import annotations

import pytest

from tracecli.planning import Grad, PlanInput, compare, predicted
from tracecli.planning.strategies.horovod import CYCLE_MS

from tracecli.costs import resolve_cost_model

MiB = 1 << 20
COST = resolve_cost_model(8, "25gbe")
SIZES = [4 * MiB, 8 * MiB, 30 * MiB, 2 * MiB, 512 * 1024, 64 * 1024]
INPUT = PlanInput(tuple(Grad(f"g{i}", n, "float32", n // 4, 1.0 + i, i) for i, n in enumerate(SIZES)),
                  2.0, 8.0)
TUNED = {"ddp tuned": "ddp", "horovod tuned": "horovod", "tf-spec tuned": "tf-spec",
         "megatron tuned": "megatron", "deepspeed tuned": "deepspeed"}


def by_label(rows):
    return {r.label: r.plan for r in rows}


def order_key(row):
    return (round(row.plan.timeline.iteration_ms, 9), len(row.plan.buckets), row.label)


def test_rows_best_first_with_every_strategy_and_each_framework_tuned():
    rows = compare(INPUT, COST, {})
    labels = [r.label for r in rows]
    assert len(labels) == len(set(labels))
    assert set(labels) == set(predicted()) | set(TUNED)  # defaults given: no "default" rows
    assert rows == sorted(rows, key=order_key)
    assert [round(r.plan.timeline.iteration_ms, 4) for r in rows] == [
        31.2545, 31.2545, 31.2545, 31.6045, 31.6045, 32.3045, 32.3045, 32.4045, 32.6045, 32.9045,
        33.3045, 35.5545, 35.5545, 35.5545]
    plans = by_label(rows)
    # Megatron out of the box: one bucket per buffer after backward, as "single"
    assert plans["megatron"].timeline.iteration_ms == plans["single"].timeline.iteration_ms
    # DeepSpeed ZeRO-2 out of the box: one 5e8-element bucket, reduced without overlap_comm
    assert plans["deepspeed"].timeline.iteration_ms == plans["single"].timeline.iteration_ms
    for name in predicted():
        assert plans[name].strategy == name and getattr(plans[name].options, "max_bytes", None) is None
    for label, strategy in TUNED.items():
        assert plans[label].strategy == strategy
    assert plans["horovod tuned"].options.max_bytes == 64 * 1024
    assert plans["horovod tuned"].options.cycle_ms == 0.1
    # nothing beats the optimum under the model it minimizes
    assert rows[0].plan.timeline.iteration_ms == pytest.approx(plans["optimal"].timeline.iteration_ms)


def test_tuned_rows_are_the_best_of_their_grid():
    plans = by_label(compare(INPUT, COST, {}))
    # the tuned DDP row is the best explicit bucket_cap_mb; a tuned row is never worse than
    # the same framework with the options given, except DDP's default 1 MiB first bucket,
    # which no explicit bucket_cap_mb reproduces
    assert plans["horovod tuned"].timeline.iteration_ms <= plans["horovod"].timeline.iteration_ms
    assert plans["tf-spec tuned"].timeline.iteration_ms <= plans["tf-spec"].timeline.iteration_ms
    assert plans["ddp tuned"].options.max_bytes == 4 * MiB
    assert plans["ddp tuned"].options.first_bucket_bytes is None


def test_defaults_rows_appear_when_the_options_are_not_the_defaults():
    rows = compare(INPUT, COST, dict(max_bytes=2 * MiB, cycle_ms=5.0))
    plans = by_label(rows)
    assert {"ddp default", "horovod default"} <= set(plans)
    assert rows == sorted(rows, key=order_key)
    for name in ("ddp", "horovod"):
        default = plans[f"{name} default"]
        assert default.strategy == name and default.options.max_bytes is None
        assert getattr(default.options, "cycle_ms", CYCLE_MS.default) == CYCLE_MS.default
        assert plans[name].options.max_bytes == 2 * MiB
    assert plans["ddp default"].settings["text"].startswith("DistributedDataParallel(model)  # defaults")
    assert plans["horovod default"].settings["text"] == (
        "export HOROVOD_FUSION_THRESHOLD=134217728 HOROVOD_CYCLE_TIME=1")


def test_horovod_default_row_for_a_non_default_cycle_alone():
    plans = by_label(compare(INPUT, COST, dict(cycle_ms=5.0)))
    assert "horovod default" in plans and "ddp default" not in plans


def test_sparse_gradients_try_sparse_as_dense():
    sparse = PlanInput((Grad("emb", 64 * MiB, "float32", 16 * MiB, 1.0, 0, True),)
                       + INPUT.grads[1:], 2.0, 8.0)
    plans = by_label(compare(sparse, COST, {}))
    assert plans["horovod"].options.sparse_as_dense is False
    tuned = plans["horovod tuned"]
    assert tuned.timeline.iteration_ms <= plans["horovod"].timeline.iteration_ms
    assert ("sparse_as_dense=True" in tuned.settings["text"]) == tuned.options.sparse_as_dense
