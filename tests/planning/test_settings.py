"""Framework settings: the text a user pastes to get a plan, for each framework's strategy.

Plans are made through the public planning API from a hand-written input, so the exact text
is checked without a trace (``plan.settings``, which ``settings_for`` fills).
"""

from __future__ import annotations

import pytest

from tracecli.planning import Grad, PlanInput, make_plan

from tracecli.costs import resolve_cost_model

MiB = 1 << 20
COST = resolve_cost_model(8, "25gbe")
SIZES = [4 * MiB, 8 * MiB, 30 * MiB, 2 * MiB, 512 * 1024, 64 * 1024]
INPUT = PlanInput(tuple(Grad(f"g{i}", n, "float32", n // 4, 1.0 + i, i) for i, n in enumerate(SIZES)),
                  2.0, 8.0)


def settings(strategy: str, inp: PlanInput = INPUT, **options) -> dict:
    return make_plan(inp, strategy, dict(**options), COST).settings


@pytest.mark.parametrize("options,text,cap_mb,first", [
    ({}, "DistributedDataParallel(model)  # defaults: bucket_cap_mb=25, first bucket 1 MiB", 25.0, MiB),
    ({"max_bytes": 8 * MiB}, "DistributedDataParallel(model, bucket_cap_mb=8)", 8.0, 8 * MiB),
    ({"max_bytes": 3 * MiB // 2}, "DistributedDataParallel(model, bucket_cap_mb=1.5)", 1.5, 3 * MiB // 2),
    ({"max_bytes": 1000}, "DistributedDataParallel(model, bucket_cap_mb=0.000954)", 1000 / MiB, 1000),
])
def test_ddp(options, text, cap_mb, first):
    s = settings("ddp", **options)
    assert s == {"framework": "pytorch-ddp", "bucket_cap_mb": cap_mb, "first_bucket_bytes": first,
                 "text": text}


def test_horovod():
    assert settings("horovod") == {
        "framework": "horovod", "HOROVOD_FUSION_THRESHOLD": 128 * MiB, "HOROVOD_CYCLE_TIME": 1.0,
        "sparse_as_dense": False, "text": "export HOROVOD_FUSION_THRESHOLD=134217728 HOROVOD_CYCLE_TIME=1"}
    s = settings("horovod", max_bytes=32 * MiB, cycle_ms=2.5)
    assert s["text"] == "export HOROVOD_FUSION_THRESHOLD=33554432 HOROVOD_CYCLE_TIME=2.5"
    assert s["HOROVOD_FUSION_THRESHOLD"] == 32 * MiB and s["HOROVOD_CYCLE_TIME"] == 2.5


def test_horovod_sparse_as_dense_names_the_tape_only_with_a_sparse_gradient():
    sparse = PlanInput((Grad("emb", 4 * MiB, "float32", MiB, 1.0, 0, True),
                        Grad("w", 2 * MiB, "float32", MiB // 2, 2.0, 1)), 2.0, 8.0)
    assert settings("horovod", sparse, sparse_as_dense=True)["text"] == (
        "export HOROVOD_FUSION_THRESHOLD=134217728 HOROVOD_CYCLE_TIME=1"
        "  # and hvd.DistributedGradientTape(tape, sparse_as_dense=True)")
    assert settings("horovod", sparse, sparse_as_dense=True)["sparse_as_dense"] is True
    assert "DistributedGradientTape" not in settings("horovod", sparse)["text"]
    assert "DistributedGradientTape" not in settings("horovod", sparse_as_dense=True)["text"]


def test_tf_spec():
    assert settings("tf-spec") == {
        "framework": "tf_cnn_benchmarks", "all_reduce_spec": "nccl", "agg_small_grads_max_bytes": 0,
        "agg_small_grads_max_group": 10, "text": "--all_reduce_spec=nccl"}
    s = settings("tf-spec", spec="nccl/xring", agg_small_grads_max_bytes=MiB,
                 agg_small_grads_max_group=16)
    assert s["text"] == ("--all_reduce_spec=nccl/xring --agg_small_grads_max_bytes=1048576 "
                         "--agg_small_grads_max_group=16")


@pytest.mark.parametrize("strategy,options,caps", [
    ("optimal", {}, "4, 38, 2.5625"),
    ("size", {}, "42, 2.5625"),
    ("size", {"max_bytes": MiB}, "4, 8, 30, 2, 0.5625"),
    ("per-tensor", {}, "4, 8, 30, 2, 0.5, 0.0625"),
    ("single", {}, "44.5625"),
])
def test_contiguous_plans_are_ddp_per_bucket_caps(strategy, options, caps):
    """Any contiguous partition in one dtype: torch >= 2.13's bucket_cap_mb_list."""
    s = settings(strategy, **options)
    assert s["framework"] == "pytorch-ddp" and s["torch"] == ">=2.13"
    assert s["text"] == f"DistributedDataParallel(model, bucket_cap_mb_list=[{caps}])  # torch >= 2.13"
    assert s["bucket_cap_mb_list"] == [float(c) for c in caps.split(", ")]


def test_mixed_dtypes_have_no_setting():
    mixed = PlanInput((Grad("a", 4 * MiB, "float32", MiB, 1.0, 0),
                       Grad("b", 2 * MiB, "float16", MiB, 2.0, 1)), 2.0, 8.0)
    assert settings("single", mixed) == {"framework": None,
                                         "text": "no framework setting reproduces this plan"}
