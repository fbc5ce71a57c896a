"""DDP's bucket assignment against torch's own ``_compute_bucket_assignment_by_size`` (needs
torch: skipped, by name, where it is not installed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecli.planning.strategies import ddp_buckets

KiB, MiB = 1024, 1024 * 1024

torch = pytest.importorskip("torch", reason="the side-by-side check needs torch")
import torch.distributed as dist  # noqa: E402

pytestmark = pytest.mark.slow  # hundreds of hypothesis examples against torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "float64": torch.float64}
# every dtype a gradient can have
GRAD_DTYPES = {**DTYPES, "bfloat16": torch.bfloat16, "complex64": torch.complex64,
               "complex128": torch.complex128}


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3 * MiB), min_size=1, max_size=40),
    first=st.integers(1, 2 * MiB),
    cap=st.integers(1, 8 * MiB),
)
def test_ddp_matches_torch_assignment(sizes, first, cap):
    elements = [max(1, s // 4) for s in sizes]
    tensors = [torch.empty(n, dtype=torch.float32) for n in elements]
    limits = [first, cap]
    theirs, _ = dist._compute_bucket_assignment_by_size(tensors, limits)
    ours = ddp_buckets([4 * n for n in elements], ["float32"] * len(elements), limits)
    assert [tuple(b) for b in theirs] == ours


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.tuples(st.integers(1, MiB), st.sampled_from(list(GRAD_DTYPES))),
                     min_size=1, max_size=30),
       first=st.integers(1, 2 * MiB), cap=st.integers(1, 4 * MiB))
def test_ddp_matches_torch_with_mixed_dtypes(data, first, cap):
    """As at DDP's rebuild (tensor_indices given): the exact order, open buckets included."""
    tensors = [torch.empty(n, dtype=GRAD_DTYPES[d]) for n, d in data]
    limits = [first, cap]
    theirs, _ = dist._compute_bucket_assignment_by_size(tensors, limits, [], list(range(len(data))))
    ours = ddp_buckets([t.numel() * t.element_size() for t in tensors], [d for _, d in data], limits)
    assert [tuple(b) for b in theirs] == ours


@settings(max_examples=200, deadline=None)
@given(data=st.lists(st.tuples(st.integers(1, MiB), st.sampled_from(list(DTYPES)), st.booleans()),
                     min_size=1, max_size=30),
       first=st.integers(1, 2 * MiB), cap=st.integers(1, 4 * MiB))
def test_ddp_matches_torch_with_sparse_gradients(data, first, cap):
    """Rebuild semantics (tensor_indices given: no re-sorting); expect_sparse_gradient
    tensors get a bucket of their own (nn.Embedding(sparse=True))."""
    tensors = [torch.empty(n, dtype=DTYPES[d]) for n, d, _ in data]
    sparse = [s for _, _, s in data]
    limits = [first, cap]
    theirs, _ = dist._compute_bucket_assignment_by_size(tensors, limits, sparse,
                                                         list(range(len(tensors))))
    ours = ddp_buckets([t.numel() * t.element_size() for t in tensors], [d for _, d, _ in data],
                       limits, sparse)
    assert [tuple(b) for b in theirs] == ours


def test_ddp_bucket_cap_mb_list_reproduces_a_partition():
    sizes = [3 * MiB, 1 * MiB, 7 * MiB, 2 * MiB, 2 * MiB]
    partition = [(0, 1), (2,), (3, 4)]
    limits = [sum(sizes[i] for i in b) for b in partition]
    tensors = [torch.empty(s // 4) for s in sizes]
    theirs, _ = dist._compute_bucket_assignment_by_size(tensors, limits)
    assert [tuple(b) for b in theirs] == partition == ddp_buckets(sizes, ["float32"] * 5, limits)
