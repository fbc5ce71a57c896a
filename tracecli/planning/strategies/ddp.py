"""``ddp``: PyTorch DDP's ``compute_bucket_assignment_by_size`` after the bucket rebuild,
its ``DistributedDataParallel(bucket_cap_mb=...)`` setting and its tuning grid."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from ..base import DDP_BUCKET_CAP, DDP_FIRST_BUCKET_BYTES, Grad, Grouping, collectives_of, sparse_alone
from ..spec import (
    MAX_BYTES, SPARSE_AS_DENSE, Kind, Knob, MiB, Options, StrategySpec, cap_candidates, mib_text,
)

__all__ = ["ddp", "ddp_buckets", "ddp_limits", "ddp_settings", "ddp_tuning", "FIRST_BUCKET_BYTES",
           "SPEC", "DdpOptions"]

FIRST_BUCKET_BYTES = Knob(
    "first_bucket_bytes", "--first-bucket-bytes", Kind.BYTES, None,
    "ddp: first bucket cap in bytes (default as torch: 1 MiB unless --max-bytes is given, "
    "then the same).")


@dataclass(frozen=True)
class DdpOptions(Options):
    max_bytes: Optional[int] = MAX_BYTES.field()  # bucket_cap_mb, in bytes
    first_bucket_bytes: Optional[int] = FIRST_BUCKET_BYTES.field()
    sparse_as_dense: bool = SPARSE_AS_DENSE.field()


def ddp_limits(opts) -> list[int]:
    """``[first_bucket_bytes, bucket_cap]`` as DistributedDataParallel computes them.

    torch >= 2.13 uses the 1 MiB first bucket only while ``bucket_cap_mb`` is left at its
    default; an explicit ``bucket_cap_mb`` makes the first bucket that size too. Pass
    ``first_bucket_bytes`` to model other versions (older torch: always 1 MiB).
    """
    cap = opts.max_bytes if opts.max_bytes is not None else DDP_BUCKET_CAP
    first = opts.first_bucket_bytes
    if first is None:
        first = DDP_FIRST_BUCKET_BYTES if opts.max_bytes is None else cap
    return [first, cap] if first < cap else [cap]


def ddp_buckets(nbytes: Sequence[int], dtypes: Sequence[str], limits: Sequence[int],
                sparse: Optional[Sequence[bool]] = None) -> list[tuple[int, ...]]:
    """PyTorch's ``compute_bucket_assignment_by_size`` (reducer.cpp) on tensors given in
    gradient-ready order, as DDP's bucket rebuild calls it.

    One accumulator per dtype; a bucket closes when its size reaches its limit, and each
    dtype then moves on to the next limit (the last one repeats). A tensor expected to get a
    sparse gradient (``expect_sparse_gradient``) gets a bucket of its own at once. The
    buckets still open come last, in the order torch's ``unordered_map`` of accumulators
    yields them: the reverse of each dtype's first appearance (checked against torch on
    thousands of cases of every gradient dtype; with ``tensor_indices`` given, as at the
    rebuild, torch does not re-sort).

    >>> MiB = 1 << 20
    >>> ddp_buckets([1024, 4 * MiB, 20 * MiB, 10 * MiB, 3 * MiB // 4, MiB // 2], ["float32"] * 6,
    ...             [MiB, 25 * MiB])
    [(0, 1), (2, 3), (4, 5)]
    """
    result: list[tuple[int, ...]] = []
    open_: dict[str, list[int]] = {}  # insertion order: each dtype's first appearance
    sizes: dict[str, int] = {}
    limit_index: dict[str, int] = {}
    for i, (n, dtype) in enumerate(zip(nbytes, dtypes)):
        if sparse is not None and sparse[i]:
            result.append((i,))
            continue
        bucket = open_.setdefault(dtype, [])
        bucket.append(i)
        sizes[dtype] = sizes.get(dtype, 0) + n
        k = limit_index.setdefault(dtype, 0)
        if sizes[dtype] >= limits[k]:
            result.append(tuple(bucket))
            open_[dtype], sizes[dtype] = [], 0
            limit_index[dtype] = min(k + 1, len(limits) - 1)
    return result + [tuple(b) for b in reversed(open_.values()) if b]


def ddp(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """DDP's rebuilt buckets; a sparse gradient (``nn.Embedding(sparse=True)``) alone."""
    alone = sparse_alone(grads, opts)
    buckets = ddp_buckets([g.nbytes for g in grads], [g.dtype for g in grads], ddp_limits(opts),
                          [i in alone for i in range(len(grads))] if alone else None)
    return Grouping(buckets, collectives=collectives_of(buckets, alone))


def ddp_settings(plan) -> dict[str, Any]:
    """``DistributedDataParallel(model, bucket_cap_mb=...)`` for the plan's options."""
    o = plan.options
    first, *rest = ddp_limits(o)
    cap = rest[0] if rest else first
    text = "DistributedDataParallel(model, bucket_cap_mb=%s)" % mib_text(cap)
    if o.max_bytes is None:
        text = "DistributedDataParallel(model)  # defaults: bucket_cap_mb=25, first bucket 1 MiB"
    return {"framework": "pytorch-ddp", "bucket_cap_mb": cap / MiB,
            "first_bucket_bytes": first, "text": text}


def ddp_tuning(inp, options):
    """Every candidate ``bucket_cap_mb`` (the first bucket as torch makes it then)."""
    for cap in cap_candidates(inp.grads):
        yield replace(options, max_bytes=cap, first_bucket_bytes=None)


SPEC = StrategySpec("ddp", ddp, DdpOptions, ddp_settings, ddp_tuning, "PyTorch DDP", defaults=(MAX_BYTES, FIRST_BUCKET_BYTES),
                    frameworks=("pytorch",))
