"""One bucket's buffers on one rank: exactly its bytes and dtype, its collective, and the
check that the collective did what it should.

An all-reduce bucket is one flat buffer; every rank fills it with a rank-dependent pattern of
small integers, so the reduced buffer must hold the exact sum (exact even in bfloat16 up to
64 ranks). An all-gather bucket (a sparse gradient) has an input of its bytes and an output
of ``world`` times that; the output must hold every rank's pattern in rank order. A
reduce-scatter bucket's input is the whole bucket; each rank's output, its shard of the sum.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from ..model import CollectiveKind
from ..planning.planfile import REPLAYABLE_DTYPES
from .records import BufferInfo

__all__ = ["BucketBuffer", "DTYPES", "KINDS", "pattern"]

# the dtypes a plan file may name (checked there, before torch is imported) are torch's names
DTYPES = {name: getattr(torch, name) for name in REPLAYABLE_DTYPES}


def pattern(rank: int, dtype: torch.dtype, device) -> torch.Tensor:
    """``((rank + i) % 3) + 1`` at position i of a period of 3."""
    return torch.tensor([((rank + i) % 3) + 1 for i in range(3)], dtype=dtype, device=device)


def _fill(flat: torch.Tensor, values: torch.Tensor) -> None:
    m = flat.numel() // 3 * 3
    if m:
        flat[:m].view(-1, 3).copy_(values.expand(m // 3, 3))
    if flat.numel() > m:
        flat[m:].copy_(values[: flat.numel() - m])


def _holds(flat: torch.Tensor, values: torch.Tensor) -> bool:
    m = flat.numel() // 3 * 3
    if m and not torch.equal(flat[:m].view(-1, 3), values.expand(m // 3, 3)):
        return False
    return flat.numel() == m or torch.equal(flat[m:], values[: flat.numel() - m])


def _reduced(buf: "BucketBuffer") -> bool:
    total = sum(pattern(r, torch.float64, "cpu") for r in range(buf.world))
    return _holds(buf.input, total.to(buf.dtype).to(buf.input.device))


def _scattered(buf: "BucketBuffer") -> bool:
    """This rank's shard of the sum: positions ``[rank·k, (rank+1)·k)`` of the summed input."""
    total = sum(pattern(r, torch.float64, "cpu") for r in range(buf.world))
    offset = buf.rank * buf.output.numel() % 3
    return _holds(buf.output, total.roll(-offset).to(buf.dtype).to(buf.input.device))


def _gathered(buf: "BucketBuffer") -> bool:
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
        _fill(self.input, pattern(rank, self.dtype, self.input.device))

    def verify(self) -> bool:
        """The collective's result is exact: the sum over ranks, or every rank's piece."""
        return self.kind.verify(self)

    def describe(self) -> BufferInfo:
        return BufferInfo(str(self.dtype).replace("torch.", ""), self.input.numel(), self.collective)
