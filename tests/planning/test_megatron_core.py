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
import math
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracecli.planning.strategies.megatron import MegatronOptions, megatron_buckets

from test_megatron import grad_list

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

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
    opts = MegatronOptions(megatron_overlap_grad_reduce=overlap, megatron_bucket_size=bucket_size or 0,
                           megatron_distributed_optimizer=distopt, megatron_grad_reduce_in_fp32=fp32,
                           megatron_pad_buckets_for_high_nccl_busbw=busbw,
                           megatron_expert_dp=expert_dp)
    out = []
    for b in megatron_buckets(g, opts, dp):
        out.append(([g[i].name for i in b.members], "float32" if fp32 else g[b.members[0]].dtype,
                     b.numel, b.numel_unpadded))
    return out


def _fixture_params():
    """The parameter lists of every sidecar the tests and samples hold, in their order."""
    cases = []
    root = FIXTURES.parent.parent
    paths = sorted(FIXTURES.glob("**/*.sizes.json")) + sorted((root / "sample_traces").glob("*.sizes.json"))
    for path in paths:
        params = json.loads(path.read_text())
        cases.append(pytest.param(
            [(f"p{i}", max(1, math.prod(p["shape"])), p["dtype"], p.get("expert", False),
              p.get("shared_embedding", False)) for i, p in enumerate(params)],
            id=str(path.relative_to(root))))
    return cases


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
