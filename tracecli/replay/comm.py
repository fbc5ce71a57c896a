"""The collectives a rank's work uses, behind one small seam.

Replay's logic (the emulated steps, measuring, calibration, gathering results on rank 0)
calls a :class:`Comm` instead of ``torch.distributed``: :class:`TorchComm` is the real
process group (gloo or NCCL); :mod:`.fakecomm` is an in-process world of threads that
keeps that logic testable without spawning ranks.
"""

from __future__ import annotations

import pickle
from typing import Any, Optional, Protocol

import torch
import torch.distributed as dist

__all__ = ["Comm", "Work", "TorchComm"]


class Work(Protocol):
    """A started collective."""

    def wait(self) -> Any: ...


class Comm(Protocol):
    """One rank's view of its world. Every rank calls the same collectives in the same order;
    with ``async_op`` a collective returns a :class:`Work` (else ``None``)."""

    rank: int
    world: int

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum",
                   async_op: bool = False) -> Optional[Work]:
        """In place: the element-wise ``op`` ("sum" or "max") over every rank's ``tensor``."""

    def all_gather_into_tensor(self, out: torch.Tensor, inp: torch.Tensor,
                               async_op: bool = False) -> Optional[Work]:
        """``out``: every rank's ``inp``, in rank order."""

    def reduce_scatter_tensor(self, out: torch.Tensor, inp: torch.Tensor,
                              async_op: bool = False) -> Optional[Work]: ...

    def broadcast(self, tensor: torch.Tensor, src: int) -> None:
        """In place: rank ``src``'s ``tensor`` on every rank."""

    def barrier(self) -> None:
        """Returns once every rank has entered it."""

    def gather_objects(self, obj: Any) -> Optional[list]:
        """Every rank's picklable ``obj`` in rank order, on rank 0 (``None`` elsewhere)."""


_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}


class TorchComm:
    """The default process group of ``torch.distributed`` (already initialised)."""

    def __init__(self, rank: int, world: int, backend: str, device: torch.device, group=None):
        self.rank, self.world = rank, world
        self.backend, self.device, self.group = backend, device, group

    def all_reduce(self, tensor, op="sum", async_op=False):
        return dist.all_reduce(tensor, op=_OPS[op], group=self.group, async_op=async_op)

    def all_gather_into_tensor(self, out, inp, async_op=False):
        return dist.all_gather_into_tensor(out, inp, group=self.group, async_op=async_op)

    def reduce_scatter_tensor(self, out, inp, async_op=False):
        return dist.reduce_scatter_tensor(out, inp, group=self.group, async_op=async_op)

    def broadcast(self, tensor, src):
        dist.broadcast(tensor, src=src, group=self.group)

    def subgroups(self, groups: list[list[int]]) -> Optional["TorchComm"]:
        """A new process group of each list of ranks (every rank calls this with the same
        lists, in the same order); this rank's comm on the one that holds it."""
        mine = None
        for ranks in groups:
            group = dist.new_group(ranks, backend=self.backend)
            if self.rank in ranks:
                mine = TorchComm(ranks.index(self.rank), len(ranks), self.backend, self.device,
                                 group)
        return mine

    def barrier(self):
        dist.barrier(group=self.group,
                     **({"device_ids": [self.device.index]} if self.backend == "nccl" else {}))

    def gather_objects(self, obj):
        """Pickled bytes through plain tensor collectives: torch's gather_object needs numpy,
        which torch does not declare as a dependency."""
        device, world = self.device, self.world
        data = torch.tensor(list(pickle.dumps(obj)), dtype=torch.uint8, device=device)
        sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
        dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64, device=device),
                        group=self.group)
        longest = max(int(s.item()) for s in sizes)
        padded = torch.zeros(longest, dtype=torch.uint8, device=device)
        padded[: data.numel()] = data
        parts = [torch.zeros(longest, dtype=torch.uint8, device=device) for _ in range(world)]
        dist.all_gather(parts, padded, group=self.group)
        if self.rank != 0:
            return None
        return [pickle.loads(bytes(p[: int(s.item())].cpu().tolist())) for p, s in zip(parts, sizes)]
