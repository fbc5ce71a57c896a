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


# -- what a flush sends, decided by DeepSpeed's own code -----------------------------------------

def deepspeed_stage3_sends(numels, size, reduce_scatter):
    """Which collective the real ``__reduce_and_partition_ipg_grads`` runs for a bucket of
    ``numels`` (contiguous gradients, DeepSpeed's default): its two senders are recorders,
    nothing else is replaced."""
    import collections

    opt = DeepSpeedZeroOptimizer_Stage3.__new__(DeepSpeedZeroOptimizer_Stage3)

    class Bucket:
        pass

    bucket = Bucket()
    bucket.params, bucket.elements, bucket.process_group = [], sum(numels), None
    bucket.buffer = torch.zeros(max(sum(numels), 1))
    for k, n in enumerate(numels):
        p = torch.nn.Parameter(torch.zeros(n))
        p.grad, p.ds_numel, p.ds_id = torch.ones(n), n, k
        bucket.params.append(p)
    opt.ipg_buckets = {torch.float32: bucket}
    opt.param_reduce_events, opt.max_param_reduce_events = collections.deque(), 2
    opt.reduce_and_partition_stream, opt.enable_sanity_checks, opt.zenflow = None, False, False
    opt.contiguous_gradients, opt.reduce_bucket_size, opt.reduce_scatter = True, size, reduce_scatter
    opt.is_zenflow_select_boundary = lambda: False
    opt._assert_same_partition_group = lambda params: None
    opt.partition_grads = lambda params, grads: None
    took = []
    opt._DeepSpeedZeroOptimizer_Stage3__avg_scatter_contiguous_grads = \
        lambda buffer, dtype: took.append(CollectiveKind.ALL_REDUCE) or []
    opt._DeepSpeedZeroOptimizer_Stage3__avg_scatter_grads = \
        lambda params, dtype: took.append(CollectiveKind.REDUCE_SCATTER) or []
    DeepSpeedZeroOptimizer_Stage3._DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads(
        opt, torch.float32)
    return took


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=12), st.integers(1, 400), st.booleans(),
       st.integers(1, 16))
def test_stage3_sends_what_deepspeed_sends_with_and_without_reduce_scatter(numels, size, rs, dp):
    """A ZeRO-3 bucket past ``reduce_bucket_size`` (a parameter larger than it) is
    reduce-scattered even with ``reduce_scatter=false``: tracecli's flushes send what the
    real method picks."""
    flushes = zero_flushes(numels, ["float32"] * len(numels), list(range(len(numels))), 3, size, dp, rs)
    for f in flushes:
        assert [f.collective] == deepspeed_stage3_sends([numels[i] for i in f.members], size, rs)


@pytest.mark.parametrize("config,autocast_dtype", [
    ({}, None), ({"bf16": {"enabled": True}}, None), ({"fp16": {"enabled": True}}, None),
    ({"communication_data_type": "fp32", "bf16": {"enabled": True}}, None),
    ({"communication_data_type": "bf16"}, None), ({"communication_data_type": "fp16"}, None),
    ({"torch_autocast": {"enabled": True, "dtype": "bfloat16"}}, torch.bfloat16),
    ({"torch_autocast": {"enabled": True, "dtype": "float16"}, "communication_data_type": "fp32"},
     torch.float16)])
def test_communication_dtypes_are_deepspeeds(config, autocast_dtype, monkeypatch, tmp_path):
    """Each parameter's communication dtype from DeepSpeed's own code (the engine's
    ``communication_data_type`` property on the config, ``init_autocast_params`` marking
    the model, ``get_param_comm_dtype``), against tracecli's from the same config's knobs and
    the sidecar DeepSpeed's one-liner writes (its ``comm_dtype`` marks)."""
    import json
    from deepspeed.runtime import torch_autocast
    from deepspeed.runtime.base_optimizer import ZeROOptimizer
    from deepspeed.runtime.config import get_communication_data_type
    from deepspeed.runtime.engine import DeepSpeedEngine
    from framework_answers import OP_LIST
    from tracecli.parsers import load
    from tracecli.pipeline import CostRequest, plan_trace

    monkeypatch.setattr(torch_autocast, "TORCH_AUTOCAST_INITIALIZED", False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(11, 6), torch.nn.LayerNorm(6), torch.nn.Linear(6, 7),
                                torch.nn.Conv1d(7, 5, 3), torch.nn.Linear(5, 4))
    precision = ("bf16" if config.get("bf16", {}).get("enabled") else
                 "fp16" if config.get("fp16", {}).get("enabled") else None)
    if precision:  # the bf16 / fp16 configs cast the model
        model = model.to(torch.bfloat16 if precision == "bf16" else torch.float16)

    class Config:
        communication_data_type = get_communication_data_type(config)

    class Engine:
        _config, module = Config(), model
        fp16_enabled = staticmethod(lambda: precision == "fp16")
        bfloat16_enabled = staticmethod(lambda: precision == "bf16")
        zero_quantized_weights = staticmethod(lambda: False)

    engine = Engine()
    if autocast_dtype is not None:
        torch_autocast.init_autocast_params(engine, autocast_dtype, None)
    optimizer = ZeROOptimizer.__new__(ZeROOptimizer)
    optimizer.communication_data_type = DeepSpeedEngine.communication_data_type.fget(engine)
    theirs = {n: str(optimizer.get_param_comm_dtype(p)).removeprefix("torch.")
              for n, p in model.named_parameters()}
    path = tmp_path / "params.json"  # docs/inputs.md's one-liner, after deepspeed.initialize
    json.dump([{"name": n, "shape": list(getattr(p, "ds_shape", p.shape)),
                "dtype": str(p.dtype).removeprefix("torch."),
                **({"comm_dtype": str(c).removeprefix("torch.")}
                   if (c := optimizer.get_param_comm_dtype(p)) != p.dtype else {})}
               for n, p in model.named_parameters()], open(path, "w"))
    opts = dict(deepspeed_stage=2, deepspeed_reduce_bucket_size=1,
                deepspeed_communication_data_type=config.get("communication_data_type", ""),
                deepspeed_precision=precision or "auto",
                deepspeed_autocast=str(autocast_dtype).removeprefix("torch.") if autocast_dtype else "")
    plan = plan_trace(load(path), "deepspeed", opts, OP_LIST, CostRequest(gpus=2)).plan
    ours = {n: b.dtype for b in plan.buckets for n in plan.tensor_names(b.index)}
    assert ours == theirs
