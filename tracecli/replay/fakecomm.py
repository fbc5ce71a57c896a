"""A fake collective backend: a world of N ranks as threads of one process.

Replay's logic (emulated steps, one channel of bucket launches, measuring, in-place
calibration, gathering on rank 0, verification) runs unchanged on it, without spawning
rank processes or joining a process group, in the way param's
``et_replay/lib/comm/backend/mock.py`` stands in for a real backend. Each collective is a
rendezvous of every rank (a :class:`threading.Barrier`); the result is computed from every
rank's deposited tensor (sum or max, gather in rank order, broadcast from ``src``).

Two knobs make the logic testable: ``delay`` (ms a rank spends in a collective after every
rank has arrived, by rank, collective and bytes) and ``wrong_sum_rank`` (that rank's sums
come out one too large in their first element, which verification must catch).

>>> world = FakeWorld(2)
>>> world.world, world.comm(1).rank
(2, 1)
"""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any, Callable, Optional, Union

import torch

from .jobs import Ranks
from .rankwork import Progress, rank_work

__all__ = ["FakeWorld", "FakeComm", "Done", "run_fake"]

# (rank, collective, bytes) -> ms; collective: "all_reduce:sum", "all_reduce:max", "all_gather",
# "broadcast:<src>", "barrier" or "gather_objects" (as in FakeWorld.log)
Delay = Callable[[int, str, int], float]


class Done:
    """The work of an async collective; the fake runs it at once, so it is already done."""

    def wait(self) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


class FakeWorld:
    """``world`` ranks in one process; :meth:`comm` is one rank's :class:`FakeComm`.

    Every rank must call the same collectives in the same order (as with a real backend);
    a mismatch raises on every rank. ``log[rank]``: that rank's collectives as
    ``(collective, bytes)``, in order.
    """

    def __init__(self, world: int, delay: Union[float, Delay] = 0.0,
                 wrong_sum_rank: Optional[int] = None, timeout_s: float = 60.0):
        self.world = world
        self.delay: Delay = delay if callable(delay) else (lambda rank, what, nbytes: delay)
        self.wrong_sum_rank = wrong_sum_rank
        self.log: list[list[tuple[str, int]]] = [[] for _ in range(world)]
        self.timeout_s = timeout_s
        self._barrier = threading.Barrier(world, timeout=timeout_s)
        self._slots: list[Any] = [None] * world
        self._busy = [threading.Lock() for _ in range(world)]
        self._subs: dict[tuple, "FakeWorld"] = {}
        self._subs_lock = threading.Lock()

    def _spawn(self, world: int, **kw) -> "FakeWorld":
        """A world of ``world`` ranks like this one (a subclass makes its own kind)."""
        return FakeWorld(world, **kw)

    def comm(self, rank: int) -> "FakeComm":
        return FakeComm(self, rank)

    def abort(self) -> None:
        """Break the rendezvous: every rank waiting in (or entering) a collective raises."""
        self._barrier.abort()
        for sub in list(self._subs.values()):
            sub.abort()

    def sub(self, key: tuple, ranks: list[int]) -> "FakeWorld":
        """The world of ``ranks`` made by the ``key``-th call (one for every rank's call)."""
        with self._subs_lock:
            if key not in self._subs:
                wrong = self.wrong_sum_rank
                self._subs[key] = self._spawn(
                    len(ranks), delay=lambda r, what, n: self.delay(ranks[r], what, n),
                    wrong_sum_rank=ranks.index(wrong) if wrong in ranks else None,
                    timeout_s=self.timeout_s)
            return self._subs[key]

    def exchange(self, rank: int, what: str, value: Any, nbytes: int) -> list:
        """Every rank's ``value`` for this collective, in rank order (after the delay)."""
        if not self._busy[rank].acquire(blocking=False):
            raise RuntimeError(f"rank {rank} started {what} while its last collective runs")
        try:
            self.log[rank].append((what, nbytes))
            self._slots[rank] = (what, value)
            self._barrier.wait()
            parts = list(self._slots)
            self._barrier.wait()  # everyone has read before the slots are reused
            if any(w != what for w, _ in parts):
                raise RuntimeError(f"rank {rank} called {what} while others called "
                                   f"{sorted({w for w, _ in parts} - {what})}")
            pause = self.delay(rank, what, nbytes)
            if pause > 0:
                time.sleep(pause / 1000.0)
            return [v for _, v in parts]
        finally:
            self._busy[rank].release()


def _bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class FakeComm:
    """One rank of a :class:`FakeWorld`, with the :class:`~.comm.Comm` methods."""

    def __init__(self, world: FakeWorld, rank: int):
        self._world = world
        self.rank, self.world = rank, world.world
        self._made = 0

    def subgroups(self, groups: list[list[int]]) -> Optional["FakeComm"]:
        """A world of each list of ranks, as :meth:`.comm.TorchComm.subgroups`."""
        mine = None
        for ranks in groups:
            self._made += 1
            sub = self._world.sub((self._made, tuple(ranks)), list(ranks))
            if self.rank in ranks:
                mine = self._sub_comm(sub, ranks.index(self.rank))
        return mine

    def _sub_comm(self, world: FakeWorld, rank: int) -> "FakeComm":
        """This rank's comm on a world of :meth:`subgroups` (a subclass makes its own)."""
        return FakeComm(world, rank)

    def _exchange(self, what: str, value: Any, nbytes: int) -> list:
        """Every rank's ``value`` of this collective, in rank order (a subclass may carry more
        with it)."""
        return self._world.exchange(self.rank, what, value, nbytes)

    def all_reduce(self, tensor, op="sum", async_op=False):
        parts = self._exchange(f"all_reduce:{op}", tensor.clone(), _bytes(tensor))
        stacked = torch.stack(parts)
        tensor.copy_(stacked.sum(0) if op == "sum" else stacked.amax(0))
        if op == "sum" and self.rank == self._world.wrong_sum_rank:
            tensor.view(-1)[0] += 1
        return Done() if async_op else None

    def all_gather_into_tensor(self, out, inp, async_op=False):
        parts = self._exchange("all_gather", inp.clone(), _bytes(inp))
        out.copy_(torch.cat(parts))
        return Done() if async_op else None

    def reduce_scatter_tensor(self, out, inp, async_op=False):
        parts = self._exchange("reduce_scatter", inp.clone(), _bytes(inp))
        n = out.numel()
        out.copy_(torch.stack(parts).sum(0)[self.rank * n:(self.rank + 1) * n])
        return Done() if async_op else None

    def broadcast(self, tensor, src):
        parts = self._exchange(f"broadcast:{src}", tensor.clone(), _bytes(tensor))
        tensor.copy_(parts[src])

    def barrier(self):
        self._exchange("barrier", None, 0)

    def gather_objects(self, obj):
        data = pickle.dumps(obj)
        parts = self._exchange("gather_objects", data, len(data))
        return [pickle.loads(p) for p in parts] if self.rank == 0 else None


def run_fake(job, world: Union[int, FakeWorld], ranks: Optional[Ranks] = None,
             progress: Progress = None, backend: str = "fake") -> Any:
    """Run :func:`~.rankwork.rank_work` of ``job`` on every rank of ``world`` (a rank count
    or a :class:`FakeWorld`), each rank a thread on the CPU; rank 0's result. A rank that
    raises breaks the rendezvous, and its error is raised here."""
    fake = world if isinstance(world, FakeWorld) else FakeWorld(world)
    ranks = ranks or Ranks(gpus=fake.world, backend="gloo")
    device = torch.device("cpu")
    results: list[Any] = [None] * fake.world
    errors: list[tuple[int, BaseException]] = []

    def one(rank: int) -> None:
        try:
            results[rank] = rank_work(job, fake.comm(rank), device, backend, ranks,
                                      progress if rank == 0 else None)
        except BaseException as exc:  # noqa: BLE001 - raised by the caller's thread
            errors.append((rank, exc))
            fake.abort()

    threads = [threading.Thread(target=one, args=(r,), name=f"fake-rank{r}", daemon=True)
               for r in range(fake.world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = [e for e in errors if not isinstance(e[1], threading.BrokenBarrierError)] or errors
        raise first[0][1]
    return results[0]
