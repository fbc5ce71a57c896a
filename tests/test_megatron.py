"""``--strategy megatron`` against Megatron-Core's own ``DistributedDataParallel``, built
side by side on CPU.

Megatron-Core's DDP is constructed for real (buffers, buckets, bucket groups) with three
stand-ins, and nothing else patched:

- a 1-rank gloo process group (real), because its bucket logging asserts
  ``torch.distributed.is_initialized()``;
- the dp / dp_cp / expert-dp / tp / pp / ep groups are objects answering ``size()`` and
  ``rank()`` (rank 0), so dp sizes 1-512 need no 512 processes;
- ``torch.cuda.current_device`` returns ``"meta"``, where ``_ParamAndGradBuffer`` allocates
  its buffers, and parameters live on the meta device: no memory, so 200M-element
  parameters cost nothing.

Install: ``pip install megatron-core==0.16.1`` (its newest wheel for Python 3.11; the
bucketing rules are those of 0.20.0, see :mod:`tracecli.planning.strategies.megatron`).
"""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecli.costs import resolve_cost_model
from tracecli.model import CollectiveKind
from tracecli.planning import Grad, PlanInput, StrategyOptions, compare, make_plan
from tracecli.planning.strategies.megatron import (
    megatron, megatron_buckets, megatron_layout, megatron_tuning,
)
from tracecli.render.plans import compare_advice

FIXTURES = Path(__file__).parent / "fixtures"
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def grad_list(specs, ready=None):
    """Grads of parameters given in ``named_parameters()`` order, listed in readiness order:
    by default the reverse of the parameter order, as in a backward pass."""
    n = len(specs)
    ready = ready or [float(n - i) for i in range(n)]
    grads = [Grad(name, numel * BYTES[dtype], dtype, numel, ready[i], i, False, expert, shared)
             for i, (name, numel, dtype, expert, shared) in enumerate(specs)]
    return sorted(grads, key=lambda g: (g.ready_ms, -g.order))


# -- cases read from the source (megatron/core/distributed/param_and_grad_buffer.py,
#    _ParamAndGradBuffer.__init__, 0.16.1 l.676-730; optimizer/param_layout.py at 0.20.0) --

def test_bucket_closes_after_the_parameter_that_reaches_the_size():
    # reversed walk: 40 (40 < 50), 30 (70 >= 50: close), 20, 10 (30: the rest)
    assert megatron_layout([10, 20, 30, 40], 50, 8) == [((3, 2), 0, 70, 70), ((1, 0), 70, 100, 30)]
    assert megatron_layout([10, 20, 30, 40], None, 8) == [((3, 2, 1, 0), 0, 100, 100)]
    assert megatron_layout([100, 1], 5, 8) == [((1, 0), 0, 101, 101)]  # 1 < 5, 101 >= 5


def test_distributed_optimizer_padding_and_shared_embedding():
    # parameter starts at multiples of 64, bucket ends at multiples of lcm(dp, 128)
    assert megatron_layout([10, 20, 30, 40], 50, 2, True) == \
        [((3, 2), 0, 128, 94), ((1, 0), 128, 256, 74)]
    assert megatron_layout([10], None, 384, True) == [((0,), 0, 384, 10)]  # lcm(384, 128)
    assert megatron_layout([10], None, 2, True, pad_for_busbw=True) == [((0,), 0, 65536, 10)]
    # a shared embedding closes the bucket before it (at its own padded start: Megatron
    # counts that padding as unpadded elements) and sits alone
    assert megatron_layout([5, 7, 9], None, 1, True, shared=[False, True, False]) == \
        [((2,), 0, 128, 64), ((1,), 128, 256, 7), ((0,), 256, 384, 5)]
    # without the distributed optimizer it changes nothing
    assert megatron_layout([5, 7, 9], None, 1, False, shared=[False, True, False]) == \
        [((2, 1, 0), 0, 21, 21)]


def test_the_strategy_sends_padded_buckets_in_the_grad_dtype():
    g = grad_list([("a", 1000, "bfloat16", False, False), ("b", 3000, "bfloat16", False, False)])
    opts = StrategyOptions(megatron_overlap_grad_reduce=True, megatron_bucket_size=2000,
                           megatron_distributed_optimizer=True, megatron_grad_reduce_in_fp32=True)
    cost = resolve_cost_model(4, "25gbe")
    grouping = megatron(g, opts, cost)
    # readiness order b, a: b's 3,000 elements pass 2,000 and close its bucket; then a
    assert [g[i].name for b in grouping.buckets for i in b] == ["b", "a"]
    assert grouping.buckets == [(0,), (1,)]
    assert grouping.collectives == [CollectiveKind.REDUCE_SCATTER] * 2
    assert grouping.messages == [(3072 * 4, "float32"), (1024 * 4, "float32")]
    assert grouping.not_before is None
    off = megatron(g, StrategyOptions(), cost)  # Megatron's default: after backward, one bucket
    assert off.buckets == [(0, 1)] and off.not_before == [2.0]  # the last gradient's
    assert off.collectives == [CollectiveKind.ALL_REDUCE] and off.messages is None  # its bytes


def test_buckets_launch_as_they_become_ready():
    # parameter order a, b, c; c ready last (not the reverse of the order)
    g = grad_list([(n, 100, "float32", False, False) for n in "abc"], ready=[1.0, 2.0, 3.0])
    grouping = megatron(g, StrategyOptions(megatron_overlap_grad_reduce=True,
                                           megatron_bucket_size=100), None)
    # Megatron's buckets are (c), (b), (a); a is ready first, so it goes first
    assert grouping.buckets == [(0,), (1,), (2,)]


def test_compare_tunes_megatron_and_prints_its_settings_whole():
    g = tuple(grad_list([(f"p{i}", n, "bfloat16", False, False)
                         for i, n in enumerate([4_000_000, 30_000_000, 20_000_000, 512, 1000])]))
    inp = PlanInput(g, 2.0, 12.0)
    cost = resolve_cost_model(8, "25gbe")
    opts = StrategyOptions(megatron_distributed_optimizer=True, megatron_grad_reduce_in_fp32=True)
    rows = {r.label: r.plan for r in compare(inp, cost, opts)}
    tuned = rows["megatron tuned"]
    assert tuned.options.megatron_distributed_optimizer and tuned.options.megatron_grad_reduce_in_fp32
    grid = [make_plan(inp, "megatron", o, cost) for o in megatron_tuning(inp, opts)]
    assert tuned.timeline.iteration_ms == min(p.timeline.iteration_ms for p in grid)
    assert rows["megatron"].options == opts  # the defaults in this setup: no separate row
    advice = compare_advice(list(compare(inp, cost, opts)))
    k = next(i for i, line in enumerate(advice) if line.startswith("  Megatron-Core DDP: "))
    end = next(i for i in range(k + 1, len(advice)) if not advice[i].startswith("    "))
    block = advice[k:end]
    assert all(len(line) <= 80 for line in block), block  # whole at 80 columns
    assert block[2].startswith("    DistributedDataParallelConfig(overlap_grad_reduce=True")
    assert any("--use-distributed-optimizer" in line for line in block)


# -- side by side with Megatron-Core's DistributedDataParallel --------------------------------

core = pytest.importorskip("megatron.core", reason="pip install megatron-core==0.16.1")
torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class _Group:
    """A stand-in process group: its size, rank 0."""

    def __init__(self, n: int):
        self.n = n

    def size(self) -> int:
        return self.n

    def rank(self) -> int:
        return 0


@pytest.fixture(scope="module", autouse=True)
def one_rank():
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield


def theirs(specs, dp, expert_dp, overlap, bucket_size, distopt, fp32, busbw):
    """Megatron-Core's buckets, in bucket-group order (dense, then expert): (names, grad
    dtype, padded numel, unpadded numel)."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer import TransformerConfig

    module = torch.nn.Module()
    for name, numel, dtype, expert, shared in specs:
        p = torch.nn.Parameter(torch.empty(numel, device="meta", dtype=DTYPES[dtype]))
        if expert:
            p.allreduce = False
        if shared:
            p.shared_embedding = True
        module.register_parameter(name, p)
    config = DistributedDataParallelConfig(
        grad_reduce_in_fp32=fp32, overlap_grad_reduce=overlap, use_distributed_optimizer=distopt,
        bucket_size=bucket_size, pad_buckets_for_high_nccl_busbw=busbw)
    pgs = ProcessGroupCollection()
    pgs.tp, pgs.dp, pgs.dp_cp, pgs.expt_dp = _Group(1), _Group(dp), _Group(dp), _Group(expert_dp)
    pgs.pp, pgs.ep = _Group(1), _Group(1)
    with mock.patch("torch.cuda.current_device", return_value="meta"):
        ddp = DistributedDataParallel(TransformerConfig(num_layers=1, hidden_size=8,
                                                        num_attention_heads=1),
                                      config, module, pg_collection=pgs)
    names = {id(p): n for n, p in module.named_parameters()}
    out = []
    for groups in (ddp.bucket_groups, ddp.expert_parallel_bucket_groups):
        for group in groups:
            assert len(group.buckets) == 1  # no fp8: one bucket a group
            b = group.buckets[0]
            out.append(([names[id(p)] for p in b.params_list], str(b.grad_data.dtype)[6:],
                        b.grad_data.numel(), b.numel_unpadded))
    return out


def ours(specs, dp, expert_dp, overlap, bucket_size, distopt, fp32, busbw):
    g = grad_list(specs)
    opts = StrategyOptions(megatron_overlap_grad_reduce=overlap, megatron_bucket_size=bucket_size or 0,
                           megatron_distributed_optimizer=distopt, megatron_grad_reduce_in_fp32=fp32,
                           megatron_pad_buckets_for_high_nccl_busbw=busbw,
                           megatron_expert_dp=expert_dp)
    out = []
    for b in megatron_buckets(g, opts, dp):
        out.append(([g[i].name for i in b.members], "float32" if fp32 else g[b.members[0]].dtype,
                     b.numel, b.numel_unpadded))
    return out


def _fixture_params():
    cases = []
    for path in sorted((FIXTURES / "kineto").glob("*.sizes.json")):
        params = json.loads(path.read_text())
        cases.append(pytest.param([(p["name"].replace(".", "_"), max(1, _prod(p["shape"])),
                                    p["dtype"], False, False) for p in params], id=path.stem))
    return cases


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


@pytest.mark.parametrize("specs", _fixture_params())
@pytest.mark.parametrize("dp", [1, 2, 8, 512])
@pytest.mark.parametrize("overlap,bucket_size,distopt", [
    (False, None, False), (True, None, False), (True, 100_000, False), (True, 1, True),
    (True, 300_000, True), (False, None, True)])
def test_fixture_parameter_lists_match_megatron(specs, dp, overlap, bucket_size, distopt):
    args = (specs, dp, dp, overlap, bucket_size, distopt, False, False)
    assert ours(*args) == theirs(*args)


PARAM = st.tuples(
    st.one_of(st.integers(1, 3_000_000), st.integers(1, 200), st.integers(40_000_000, 200_000_000)),
    st.sampled_from(list(DTYPES)), st.booleans(), st.integers(0, 9))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=st.lists(PARAM, min_size=1, max_size=25),
       dp=st.integers(1, 512), expert_dp=st.integers(1, 64), overlap=st.booleans(),
       bucket_size=st.one_of(st.none(), st.integers(1, 5_000_000)), distopt=st.booleans(),
       fp32=st.booleans(), busbw=st.booleans())
def test_generated_parameter_lists_match_megatron(params, dp, expert_dp, overlap, bucket_size,
                                                  distopt, fp32, busbw):
    # one in ten is a shared embedding
    specs = [(f"p{i}", n, d, e, s == 0) for i, (n, d, e, s) in enumerate(params)]
    args = (specs, dp, expert_dp, overlap, bucket_size, distopt, fp32, busbw)
    assert ours(*args) == theirs(*args)
