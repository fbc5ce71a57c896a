"""The strategies of no framework's own: one all-reduce per gradient, one for all, and a
greedy size cap.

- ``per-tensor``: one all-reduce per gradient (Detectron; wait-free backprop).
- ``single``: one bucket after backward (tower averaging, Ray's LocalSyncParallelOptimizer).
- ``size``: greedy, close once size >= cap (the crossing tensor included).

Their plans are contiguous partitions, which DDP's per-bucket caps reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..base import DDP_BUCKET_CAP, Grad, Grouping, collectives_of, sparse_alone
from ..spec import MAX_BYTES, SPARSE_AS_DENSE, Options, StrategySpec

__all__ = ["per_tensor", "single", "size_greedy", "PER_TENSOR", "SINGLE", "SIZE",
           "PerTensorOptions", "SizeOptions", "SIZE_CAP"]

SIZE_CAP = DDP_BUCKET_CAP  # the size strategy's cap when --max-bytes is not given


@dataclass(frozen=True)
class PerTensorOptions(Options):
    sparse_as_dense: bool = SPARSE_AS_DENSE.field()


@dataclass(frozen=True)
class SizeOptions(Options):
    max_bytes: Optional[int] = MAX_BYTES.field()

    @property
    def cap(self) -> int:
        return self.max_bytes if self.max_bytes is not None else SIZE_CAP


def per_tensor(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """One collective per gradient, in readiness order (a sparse one all-gathered)."""
    buckets = [(i,) for i in range(len(grads))]
    return Grouping(buckets, collectives=collectives_of(buckets, sparse_alone(grads, opts)))


def single(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """Everything in one bucket, reduced once backward has produced the last gradient."""
    return Grouping([tuple(range(len(grads)))] if grads else [])


def size_greedy(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """Greedy in readiness order: a bucket closes once its size reaches the cap.

    >>> g = [Grad(str(i), n, "float32", n // 4, 0.0, i) for i, n in enumerate([4, 4, 12, 4])]
    >>> size_greedy(g, SizeOptions(max_bytes=8)).buckets
    [(0, 1), (2,), (3,)]
    """
    cap = opts.cap
    buckets, current, size = [], [], 0
    for i, g in enumerate(grads):
        current.append(i)
        size += g.nbytes
        if size >= cap:
            buckets.append(tuple(current))
            current, size = [], 0
    if current:
        buckets.append(tuple(current))
    return Grouping(buckets)


PER_TENSOR = StrategySpec("per-tensor", per_tensor, PerTensorOptions)
SINGLE = StrategySpec("single", single)
SIZE = StrategySpec("size", size_greedy, SizeOptions)
