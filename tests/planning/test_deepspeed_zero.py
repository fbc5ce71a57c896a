"""``--strategy deepspeed`` against DeepSpeed's own code, side by side (DeepSpeed 0.19.8 on CPU).

DeepSpeed's bucketing methods are run for real on an optimizer object made without its
``__init__`` (which needs a model, an engine and process groups): the attributes the
methods read are set, and only what they call to move data or talk to other ranks is
replaced by a recorder. Exactly:

- stages 1-2: ``DeepSpeedZeroOptimizer.reduce_independent_p_g_buckets_and_remove_grads``
  runs as is (contiguous gradients, the real ``IPGBucket`` and its buffers);
  ``reduce_ipg_grads`` (the flush) records the bucket's parameters and clears it, as the
  real one ends; ``report_ipg_memory_usage`` and ``_maybe_reduce_autoep_folding_tp_gradient``
  do nothing. What a flush sends: the real ``allreduce_and_scatter`` on the bucket's
  slices, with ``allreduce_and_copy_with_multiple_ranks`` recording each all-reduce's size.
- stage 3: ``DeepSpeedZeroOptimizer_Stage3.reduce_independent_p_g_buckets_and_remove_grads``
  runs as is; ``__reduce_and_partition_ipg_grads`` records and clears; ``__add_grad_to_ipg_bucket``
  keeps the real one's bookkeeping (append the parameter, set its group, add its elements)
  without its stream and buffer copy. What a flush sends: the real
  ``reduce_scatter_coalesced``, its rank and world size answered by a fake ``dist``, its
  ``_torch_reduce_scatter_fn`` recording the input's size.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DS_ACCELERATOR", "cpu")
deepspeed = pytest.importorskip("deepspeed")
torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from deepspeed.runtime.comm import coalesced_collectives as cc  # noqa: E402
from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3  # noqa: E402
from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer, IPGBucket  # noqa: E402

from tracecli.model import CollectiveKind  # noqa: E402
from tracecli.planning.strategies.deepspeed import _allreduce_pieces, _slices, zero_flushes  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _params(numels, dtypes):
    params = []
    for k, (n, d) in enumerate(zip(numels, dtypes)):
        p = torch.nn.Parameter(torch.zeros(n, dtype=DTYPES[d]))
        p.grad = torch.ones(n, dtype=DTYPES[d])
        p.param_idx_in_group, p.ds_numel, p.ds_id = k, n, k
        params.append(p)
    return params


def deepspeed_stage12(numels, dtypes, order, size):
    """The flushes DeepSpeed's stage 1-2 makes, as lists of parameter positions."""
    opt = DeepSpeedZeroOptimizer.__new__(DeepSpeedZeroOptimizer)
    params = _params(numels, dtypes)
    flushed = []
    opt.reduce_bucket_size, opt.contiguous_gradients, opt.overlap_comm = size, True, True
    opt.use_grad_accum_attribute, opt.zenflow = False, False
    opt._offload_gradient_safety_enabled = False
    opt.extra_large_param_to_reduce = {}
    opt.param_id = {id(p): k for k, p in enumerate(params)}
    opt.params_already_reduced = [False] * len(params)
    opt.ipg_buckets = {DTYPES[d]: IPGBucket(buffer=[torch.zeros(size, dtype=DTYPES[d]),
                                                    torch.zeros(size, dtype=DTYPES[d])])
                       for d in set(dtypes)}
    opt.get_param_comm_dtype = lambda p: p.dtype
    opt.report_ipg_memory_usage = lambda *a, **k: None
    opt._maybe_reduce_autoep_folding_tp_gradient = lambda *a: None

    def reduce_ipg_grads(comm_dtype=None):
        for dtype in ([comm_dtype] if comm_dtype is not None else sorted(opt.ipg_buckets, key=str)):
            bucket = opt.ipg_buckets[dtype]
            if bucket.params:
                flushed.append([pid for _, _, pid in bucket.params])
            opt.extra_large_param_to_reduce.pop(dtype, None)
            bucket.clear()

    opt.reduce_ipg_grads = reduce_ipg_grads
    for i in order:
        DeepSpeedZeroOptimizer.reduce_independent_p_g_buckets_and_remove_grads(opt, params[i], 0)
    reduce_ipg_grads()  # independent_gradient_partition_epilogue
    return flushed


def deepspeed_stage3(numels, dtypes, order, size):
    opt = DeepSpeedZeroOptimizer_Stage3.__new__(DeepSpeedZeroOptimizer_Stage3)
    params = _params(numels, dtypes)
    flushed = []
    opt.reduce_bucket_size = size

    class Bucket:
        def __init__(self):
            self.params, self.elements, self.process_group = [], 0, None

    opt.ipg_buckets = {DTYPES[d]: Bucket() for d in set(dtypes)}
    opt.get_param_comm_dtype = lambda p: p.dtype
    opt._get_param_partition_group = lambda p: "dp"
    opt.report_ipg_memory_usage = lambda *a, **k: None
    opt._apply_autoep_folding_tp_correction = lambda p: None

    def add(param):  # the real one's bookkeeping, without its stream and buffer copy
        bucket = opt.ipg_buckets[opt.get_param_comm_dtype(param)]
        bucket.params.append(param)
        bucket.process_group = opt._get_param_partition_group(param)
        bucket.elements += param.grad.numel()

    def reduce(dtype):
        bucket = opt.ipg_buckets[dtype]
        if bucket.params:
            flushed.append([p.param_idx_in_group for p in bucket.params])
        bucket.params, bucket.elements = [], 0

    opt._DeepSpeedZeroOptimizer_Stage3__add_grad_to_ipg_bucket = add
    opt._DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads = reduce
    for i in order:
        DeepSpeedZeroOptimizer_Stage3.reduce_independent_p_g_buckets_and_remove_grads(opt, params[i])
    for dtype in sorted(opt.ipg_buckets, key=str):
        reduce(dtype)
    return flushed


def deepspeed_allreduce_sizes(slices, size):
    """What the real ``allreduce_and_scatter`` sends for a bucket's slices."""
    opt = DeepSpeedZeroOptimizer.__new__(DeepSpeedZeroOptimizer)
    sent = []
    opt.allreduce_and_copy_with_multiple_ranks = \
        lambda bucket, *a, **k: sent.append(sum(t.numel() for t in bucket))
    DeepSpeedZeroOptimizer.allreduce_and_scatter(
        opt, [(frozenset({r}), torch.zeros(s), None) for r, s in enumerate(slices)],
        torch.float32, numel_per_bucket=size)
    return sent


def deepspeed_reduce_scatter_size(numels, world, monkeypatch):
    sent = []

    class FakeDist:
        @staticmethod
        def get_rank(group=None):
            return 0

        @staticmethod
        def get_world_size(group=None):
            return world

    monkeypatch.setattr(cc, "dist", FakeDist)
    monkeypatch.setattr(cc, "_torch_reduce_scatter_fn",
                        lambda inp, out, group=None: sent.append(inp.numel()))
    cc.reduce_scatter_coalesced([torch.ones(n) for n in numels], group=None)
    return sent


def ours(numels, dtypes, order, stage, size, dp=2):
    return [list(f.members) for f in zero_flushes(numels, dtypes, order, stage, size, dp)]


CASES = [  # (numels, dtypes, bucket size)
    ([4, 4, 4, 9], ["float32"] * 4, 8),
    ([10, 3, 3, 3, 20, 1], ["float32"] * 6, 9),
    ([5, 5, 5, 5], ["float32", "bfloat16", "float32", "bfloat16"], 9),
    ([30, 2, 2], ["float32"] * 3, 10),  # an oversize first parameter
    ([0, 4, 0, 4], ["float32"] * 4, 4),  # empty parameters are skipped
]


@pytest.mark.parametrize("numels,dtypes,size", CASES)
def test_stage12_flushes_are_deepspeeds(numels, dtypes, size):
    order = list(reversed(range(len(numels))))
    assert ours(numels, dtypes, order, 2, size) == deepspeed_stage12(numels, dtypes, order, size)


@pytest.mark.parametrize("numels,dtypes,size", CASES)
def test_stage3_flushes_are_deepspeeds(numels, dtypes, size):
    order = list(reversed(range(len(numels))))
    assert ours(numels, dtypes, order, 3, size) == deepspeed_stage3(numels, dtypes, order, size)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.sampled_from(list(DTYPES))), min_size=1,
                max_size=40),
       st.integers(1, 400), st.randoms(use_true_random=False), st.sampled_from([2, 3]))
def test_generated_parameter_lists(params, size, rnd, stage):
    numels, dtypes = [n for n, _ in params], [d for _, d in params]
    order = list(range(len(numels)))
    rnd.shuffle(order)
    theirs = (deepspeed_stage12 if stage == 2 else deepspeed_stage3)(numels, dtypes, order, size)
    assert ours(numels, dtypes, order, stage, size) == theirs


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 500), min_size=1, max_size=30), st.integers(1, 64),
       st.integers(1, 400))
def test_an_oversize_parameter_is_sent_as_deepspeed_sends_it(numels, dp, size):
    """A flush past the size: DeepSpeed's slices of it (the ZeRO-1/2 partitions it spans),
    all-reduced in the pieces its ``allreduce_and_scatter`` makes."""
    total = sum(numels)
    part = -(-total // (2 * dp)) * (2 * dp) // dp
    offset = sum(numels[:-1])
    slices = _slices(offset, numels[-1], part)
    assert sum(slices) == numels[-1] and all(s <= part for s in slices)
    assert list(_allreduce_pieces(slices, size)) == deepspeed_allreduce_sizes(slices, size)


@pytest.mark.parametrize("world", [1, 2, 3, 8, 512])
def test_stage3_reduce_scatter_size_is_deepspeeds(world, monkeypatch):
    numels = [7, 64, 1, 1000]
    flush = zero_flushes(numels, ["float32"] * 4, [0, 1, 2, 3], 3, 10_000, world)
    assert [f.collective for f in flush] == [CollectiveKind.REDUCE_SCATTER]
    assert list(flush[0].sends) == deepspeed_reduce_scatter_size(numels, world, monkeypatch)


def test_deepspeed_is_the_version_read():
    assert deepspeed.__version__.startswith("0.19."), deepspeed.__version__
