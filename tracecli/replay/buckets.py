"""One bucket's buffers on one rank: exactly its bytes and dtype, its collective, and the
check that the collective did what it should.

An all-reduce bucket is one flat buffer; every rank fills it with a rank-dependent pattern of
small non-negative integers, so the reduced buffer must hold the exact sum. NCCL adds the
ranks' values in its own order (a ring's, a tree's), rounding every partial sum to the dtype;
with non-negative values every partial sum is at most the total, so the sum is exact in any
order when each position's total is an integer the dtype holds exactly (up to 2/eps: 256 in
bfloat16, 2048 in float16). The pattern is ``((rank + i) % 3) + 1`` while its totals stay
there (bfloat16: up to 127 ranks); beyond, ``1`` where ``(rank + i) % m == 0`` and ``0``
elsewhere, ``m`` the smallest period >= 2 that keeps every total exact (bfloat16 at 4,096
ranks: 16). An all-gather bucket (a sparse gradient) has an input of its bytes and an output
of ``world`` times that; the output must hold every rank's pattern in rank order. A
reduce-scatter bucket's input is the whole bucket; each rank's output, its shard of the sum.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import torch

from ..model import CollectiveKind
from ..planning.planfile import REPLAYABLE_DTYPES
from .records import BufferInfo

__all__ = ["BucketBuffer", "DTYPES", "KINDS", "pattern"]

# the dtypes a plan file may name (checked there, before torch is imported) are torch's names
DTYPES = {name: getattr(torch, name) for name in REPLAYABLE_DTYPES}


def _exact_up_to(dtype: torch.dtype) -> int:
    """Every integer up to this is exactly representable in ``dtype``.

    >>> _exact_up_to(torch.bfloat16), _exact_up_to(torch.float16), _exact_up_to(torch.float32)
    (256, 2048, 16777216)
    """
    return int(round(2 / torch.finfo(dtype).eps))


@functools.lru_cache(maxsize=256)
def _period(world: int, dtype: torch.dtype) -> int:
    """0: the rich pattern (period 3) sums exactly over ``world`` ranks; else the sparse
    pattern's period."""
    limit = _exact_up_to(dtype)
    rich = max(sum(((r + i) % 3) + 1 for r in range(world)) for i in range(3))
    return 0 if rich <= limit else max(2, math.ceil(world / limit))


def pattern(rank: int, dtype: torch.dtype, device, world: int = 1) -> torch.Tensor:
    """One period of ``rank``'s values, whose sums over ``world`` ranks are exact in
    ``dtype`` (see the module's docstring).

    >>> pattern(1, torch.float32, "cpu").tolist(), pattern(1, torch.bfloat16, "cpu", 128).tolist()
    ([2.0, 3.0, 1.0], [0.0, 1.0])
    """
    m = _period(world, dtype)
    values = ([((rank + i) % 3) + 1 for i in range(3)] if m == 0 else
              [1 if (rank + i) % m == 0 else 0 for i in range(m)])
    return torch.tensor(values, dtype=dtype, device=device)


def _fill(flat: torch.Tensor, values: torch.Tensor) -> None:
    p = values.numel()
    m = flat.numel() // p * p
    if m:
        flat[:m].view(-1, p).copy_(values.expand(m // p, p))
    if flat.numel() > m:
        flat[m:].copy_(values[: flat.numel() - m])


def _holds(flat: torch.Tensor, values: torch.Tensor) -> bool:
    p = values.numel()
    m = flat.numel() // p * p
    if m and not torch.equal(flat[:m].view(-1, p), values.expand(m // p, p)):
        return False
    return flat.numel() == m or torch.equal(flat[m:], values[: flat.numel() - m])


def _total(buf: "BucketBuffer") -> torch.Tensor:
    """One period of the sum over every rank (exact: see :func:`_period`)."""
    return sum(pattern(r, torch.float64, "cpu", buf.world) for r in range(buf.world)) \
        if _period(buf.world, buf.dtype) == 0 else _sparse_total(buf)


def _sparse_total(buf: "BucketBuffer") -> torch.Tensor:
    m = _period(buf.world, buf.dtype)
    return torch.tensor([sum(1 for r in range(buf.world) if (r + i) % m == 0) for i in range(m)],
                        dtype=torch.float64)


def _reduced(buf: "BucketBuffer") -> bool:
    return _holds(buf.input, _total(buf).to(buf.dtype).to(buf.input.device))


def _scattered(buf: "BucketBuffer") -> bool:
    """This rank's shard of the sum: positions ``[rank·k, (rank+1)·k)`` of the summed input."""
    total = _total(buf)
    offset = buf.rank * buf.output.numel() % total.numel()
    return _holds(buf.output, total.roll(-offset).to(buf.dtype).to(buf.input.device))


def _gathered(buf: "BucketBuffer") -> bool:
    """Nothing is summed: every rank's own (period-3) pattern, in rank order."""
    n, device = buf.input.numel(), buf.input.device
    return all(_holds(buf.output[r * n:(r + 1) * n], pattern(r, buf.dtype, device))
               for r in range(buf.world))


class KindBuffers(NamedTuple):
    """How replay runs a bucket of one collective kind."""

    output_elements: Callable[[int, int], int]  # (input elements, world) -> output (0: in place)
    input_multiple: Callable[[int], int]  # world -> what the input's element count is a multiple of
    launch: Callable  # (buffer, comm, async_op) -> work (None unless async_op)
    verify: Callable[["BucketBuffer"], bool]  # the result is exact


# One row a kind: its buffers, its launch, its check.
KINDS: dict[CollectiveKind, KindBuffers] = {
    CollectiveKind.ALL_REDUCE: KindBuffers(
        lambda n, world: 0, lambda world: 1,
        lambda buf, comm, async_op: comm.all_reduce(buf.input, async_op=async_op),
        _reduced),
    CollectiveKind.ALL_GATHER: KindBuffers(
        lambda n, world: n * world, lambda world: 1,
        lambda buf, comm, async_op: comm.all_gather_into_tensor(buf.output, buf.input,
                                                                async_op=async_op),
        _gathered),
    CollectiveKind.REDUCE_SCATTER: KindBuffers(  # the bucket is the whole input; each rank a shard
        lambda n, world: n // world, lambda world: world,
        lambda buf, comm, async_op: comm.reduce_scatter_tensor(buf.output, buf.input,
                                                               async_op=async_op),
        _scattered),
}


class BucketBuffer:
    """One bucket's input (exactly its bytes, rounded up to whole elements, and to a multiple
    of the ranks where the kind scatters it), its output where the collective is not in
    place, and the kind's launch and check."""

    def __init__(self, nbytes: int, dtype: str, collective: CollectiveKind, world: int, device):
        self.kind = KINDS[collective]
        self.dtype = DTYPES.get(dtype, torch.float32)
        size = torch.tensor([], dtype=self.dtype).element_size()
        multiple = self.kind.input_multiple(world)
        elements = max(1, math.ceil(nbytes / size))
        self.input = torch.empty(-(-elements // multiple) * multiple, dtype=self.dtype,
                                 device=device)
        out = self.kind.output_elements(self.input.numel(), world)
        self.output = torch.empty(out, dtype=self.dtype, device=device) if out else None
        self.collective = collective
        self.world = world
        self.rank = 0  # set by fill
        self.nbytes = self.input.numel() * self.input.element_size()

    def launch(self, comm, async_op: bool = False):
        """Run (or with ``async_op``, start) the bucket's collective on ``comm``
        (a :class:`~.comm.Comm`)."""
        return self.kind.launch(self, comm, async_op)

    def fill(self, rank: int) -> None:
        self.rank = rank
        summed = self.collective is not CollectiveKind.ALL_GATHER
        _fill(self.input, pattern(rank, self.dtype, self.input.device,
                                  self.world if summed else 1))

    def verify(self) -> bool:
        """The collective's result is exact: the sum over ranks, or every rank's piece."""
        return self.kind.verify(self)

    def describe(self) -> BufferInfo:
        return BufferInfo(str(self.dtype).replace("torch.", ""), self.input.numel(), self.collective)
