"""Each strategy against the system it names (DESIGN 4.4)."""

from __future__ import annotations

import pytest

from tracecli.errors import PlanError
from tracecli.planning.base import Grad, Grouping
from tracecli.costs import AlphaBeta as CostModel
from tracecli.model import CollectiveKind
from tracecli.planning import options_of
from tracecli.planning.strategies.ddp import DdpOptions
from tracecli.planning.strategies.deepspeed import DeepSpeedOptions
from tracecli.planning.strategies.horovod import HorovodOptions
from tracecli.planning.strategies.simple import SizeOptions
from tracecli.planning.strategies.tf_spec import TfSpecOptions
from tracecli.planning.timeline import simulate
from tracecli.planning.strategies import (
    STRATEGIES, ddp, ddp_buckets, ddp_limits, extract_ranges, horovod, horovod_fuse,
    pack_small_tensors, parse_all_reduce_spec, size_greedy, tf_spec,
)

KiB, MiB = 1024, 1024 * 1024


def grads(sizes, dtypes=None, ready=None, order=None):
    dtypes = dtypes or ["float32"] * len(sizes)
    ready = ready or [float(i) for i in range(len(sizes))]
    order = order or list(range(len(sizes)))
    return [Grad(f"g{i}", n, d, n // 4, r, o)
            for i, (n, d, r, o) in enumerate(zip(sizes, dtypes, ready, order))]


# -- PyTorch DDP ---------------------------------------------------------------------------

@pytest.mark.parametrize("sizes,expected", [
    ([1 * KiB, 4 * MiB, 20 * MiB, 10 * MiB, 3 * MiB // 4, MiB // 2], [(0, 1), (2, 3), (4, 5)]),
    ([1 * MiB, 1 * MiB, 24 * MiB, 1 * MiB], [(0,), (1, 2), (3,)]),
])
def test_ddp_fixed_cases(sizes, expected):
    opts = DdpOptions(first_bucket_bytes=MiB, max_bytes=25 * MiB)
    assert ddp(grads(sizes), opts).buckets == expected


def test_ddp_limits_follow_torch():
    # default: 1 MiB first bucket, 25 MiB after; an explicit cap replaces both (torch 2.13)
    assert ddp_limits(DdpOptions()) == [MiB, 25 * MiB]
    assert ddp_limits(DdpOptions(max_bytes=50 * MiB)) == [50 * MiB]
    assert ddp_limits(DdpOptions(max_bytes=50 * MiB, first_bucket_bytes=MiB)) == [MiB, 50 * MiB]


def test_ddp_dtypes_accumulate_separately():
    sizes = [600 * KiB, 600 * KiB, 600 * KiB, 600 * KiB]
    dtypes = ["float32", "float16", "float32", "float16"]
    assert ddp_buckets(sizes, dtypes, [MiB, 25 * MiB]) == [(0, 2), (1, 3)]


def test_sparse_gradients_travel_alone_unless_densified():
    g = grads([4 * MiB, 30 * MiB, 2 * MiB], ready=[1.0, 1.2, 1.4])
    g[1] = g[1]._replace(sparse=True)
    cost = CostModel("x", 5.0, 10.0, 8)
    for name in ("ddp", "horovod", "per-tensor", "optimal"):
        grouping = STRATEGIES[name].group(g, options_of(name), cost)
        assert (1,) in grouping.buckets, name
        assert grouping.collectives[grouping.buckets.index((1,))] is CollectiveKind.ALL_GATHER, name
        dense = STRATEGIES[name].group(g, options_of(name, {"sparse_as_dense": True}), cost)
        assert dense.collectives is None, name
    assert horovod(g, HorovodOptions(sparse_as_dense=True)).buckets == [(0, 1, 2)]
    timeline = simulate(g, Grouping([(0,), (1,), (2,)], None, [CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER,
                                                      CollectiveKind.ALL_REDUCE]),
                        cost, 0.0, 2.0)
    gather = cost.time_ms(CollectiveKind.ALL_GATHER, 30 * MiB)
    assert timeline.buckets[1].duration_ms == pytest.approx(gather)
    assert gather > cost.time_ms(CollectiveKind.ALL_REDUCE, 30 * MiB)  # 8 ranks' shares gathered


# -- Horovod ------------------------------------------------------------------------------

def test_horovod_fusion_cases():
    assert horovod_fuse([10, 20, 30, 40], ["float32"] * 4, 60) == [(0, 1, 2), (3,)]
    assert horovod_fuse([10, 20, 30, 40], ["float32", "float16", "float32", "float32"], 60) == \
        [(0, 2), (1,), (3,)]
    assert horovod_fuse([100, 5], ["float32"] * 2, 60) == [(0,), (1,)]  # larger one alone


def test_horovod_no_look_ahead_past_a_tensor_too_large_to_fit():
    # 10 + 50 > 55 and the look-ahead budget (fused + skipped <= threshold) is spent at once:
    # the group closes, so only tensors of another dtype are ever skipped.
    assert horovod_fuse([10, 50, 5], ["float32"] * 3, 55) == [(0,), (1, 2)]
    assert horovod_fuse([10, 20, 5], ["float32", "float16", "float32"], 55) == [(0, 2), (1,)]


def test_horovod_cycles_split_groups():
    g = grads([10, 20, 30, 40], ready=[0.1, 0.5, 1.2, 1.9])
    result = horovod(g, HorovodOptions(max_bytes=1000, cycle_ms=1.0))
    assert result.buckets == [(0, 1), (2, 3)]
    assert result.not_before == [1.0, 2.0]


# -- tf_cnn_benchmarks --------------------------------------------------------------------

@pytest.mark.parametrize("elements,max_bytes,expected", [
    ([8, 9, 12, 125], 40, [(0, 1), (2,), (3,)]),
    ([125, 6, 5], 40, [(1, 2), (0,)]),
    ([125, 6, 5, 7, 100], 40, [(1, 2, 3), (0,), (4,)]),
    ([4, 4, 9, 9], 12, [(0,), (1,), (2,), (3,)]),
    ([4, 4, 9, 9], 16, [(0, 1), (2,), (3,)]),
    ([4, 4, 9, 9], 256, [(0, 1, 2, 3)]),
])
def test_pack_small_tensors_cases(elements, max_bytes, expected):
    assert pack_small_tensors(elements, ["float32"] * len(elements), max_bytes, 10) == expected


def test_pack_only_float32_and_max_group():
    assert pack_small_tensors([4, 4, 4], ["float32", "float16", "float32"], 64, 10) == [(0,), (1,), (2,)]
    # a range grows while last - first <= max_group: up to max_group + 2 members
    assert extract_ranges(list(range(10)), 2) == ([[0, 3], [4, 7], [8, 9]], [])
    assert extract_ranges([1, 3, 4], 10) == ([[3, 4]], [1])


def test_parse_all_reduce_spec():
    assert [tuple(p) for p in parse_all_reduce_spec("pscpu:32k:xring")] == \
        [("pscpu", 1, 32768), ("xring", 1, -1)]
    assert [tuple(p) for p in parse_all_reduce_spec("nccl#2:1M:pscpu/pscpu#3:2G:xring")] == \
        [("nccl", 2, MiB), ("pscpu/pscpu", 3, 2 * 1024 * MiB), ("xring", 1, -1)]
    for bad in ("pscpu:32k", "pscpu:32m:xring", "foo", "xring#x", "pscpu:32q:xring"):
        with pytest.raises(PlanError):
            parse_all_reduce_spec(bad)


def test_tf_spec_parts_by_elements_in_variable_order():
    # readiness order is the reverse of variable order, as in a real backward pass
    g = grads([4 * 10, 4 * 100_000, 4 * 8, 4 * 50_000], order=[3, 2, 1, 0])
    opts = TfSpecOptions(spec="pscpu:32k:xring", agg_small_grads_max_bytes=64,
                           agg_small_grads_max_group=10)
    result = tf_spec(g, opts)
    assert sorted(result.buckets) == [(0, 2), (1,), (3,)]  # 8- and 10-element ones packed
    readies = [max(b) for b in result.buckets]
    assert readies == sorted(readies)  # launched as they become ready


# -- size and the registry ----------------------------------------------------------------

def test_size_greedy_crossing_tensor_included():
    assert size_greedy(grads([5, 5, 1, 20, 1]), SizeOptions(max_bytes=10)).buckets == \
        [(0, 1), (2, 3), (4,)]


def test_registry_names():
    assert list(STRATEGIES) == ["per-tensor", "single", "size", "ddp", "horovod", "tf-spec", "megatron",
                                "deepspeed", "optimal",
                                "observed"]
    assert all(spec.name == name for name, spec in STRATEGIES.items())
    assert [name for name, spec in STRATEGIES.items() if spec.from_run] == ["observed"]


def test_deepspeed_costs_an_oversize_parameter_as_one_bucket_and_says_so():
    from tracecli.planning.strategies.deepspeed import deepspeed

    grads = [Grad(f"g{i}", 4 * n, "float32", n, float(i), 3 - i) for i, n in enumerate([10, 90, 10, 0])]
    opts = DeepSpeedOptions(deepspeed_reduce_bucket_size=20, deepspeed_overlap_comm="true")
    from tracecli.costs import resolve_cost_model

    grouping = deepspeed(grads, opts, resolve_cost_model(4, "25gbe"))
    # g1 (90 elements) passes 20 alone; on 4 ranks its partitions cut it into pieces
    assert grouping.buckets == [(0,), (1,), (2, 3)]  # the empty g3 rides with the last flush
    assert any("past reduce_bucket_size" in n for n in grouping.notes)
