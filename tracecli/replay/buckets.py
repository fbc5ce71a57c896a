"""One bucket's buffers on one rank: exactly its bytes and dtype, its collective, and the
check that the collective did what it should.

An all-reduce bucket is one flat buffer; every rank fills it with a rank-dependent pattern of
small integers, so the reduced buffer must hold the exact sum (exact even in bfloat16 up to
64 ranks). An all-gather bucket (a sparse gradient) has an input of its bytes and an output
of ``world`` times that; the output must hold every rank's pattern in rank order.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from ..planning.base import ALLGATHER
from ..planning.planfile import REPLAYABLE_DTYPES

__all__ = ["BucketBuffer", "DTYPES", "pattern"]

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


class BucketBuffer:
    def __init__(self, nbytes: int, dtype: str, collective: str, world: int, device):
        self.dtype = DTYPES.get(dtype, torch.float32)
        size = torch.tensor([], dtype=self.dtype).element_size()
        self.input = torch.empty(max(1, math.ceil(nbytes / size)), dtype=self.dtype, device=device)
        self.output = (torch.empty(self.input.numel() * world, dtype=self.dtype, device=device)
                       if collective == ALLGATHER else None)
        self.collective = collective
        self.world = world
        self.nbytes = self.input.numel() * self.input.element_size()

    def launch(self, group=None, async_op: bool = False):
        """Run (or with ``async_op``, start) the bucket's collective."""
        if self.output is not None:
            return dist.all_gather_into_tensor(self.output, self.input, group=group,
                                               async_op=async_op)
        return dist.all_reduce(self.input, group=group, async_op=async_op)

    def fill(self, rank: int) -> None:
        _fill(self.input, pattern(rank, self.dtype, self.input.device))

    def verify(self) -> bool:
        """The collective's result is exact: the sum over ranks, or every rank's piece."""
        device = self.input.device
        if self.output is None:
            total = sum(pattern(r, torch.float64, "cpu") for r in range(self.world))
            return _holds(self.input, total.to(self.dtype).to(device))
        n = self.input.numel()
        return all(_holds(self.output[r * n:(r + 1) * n], pattern(r, self.dtype, device))
                   for r in range(self.world))

    def describe(self) -> dict[str, Any]:
        return {"dtype": str(self.dtype).replace("torch.", ""), "elements": self.input.numel(),
                "collective": self.collective}
