"""Per collective kind: the alpha-beta terms of its ring (and tree) algorithm.

One row a kind, the only place the formulas are written. With ``p`` ranks, per-step
latency ``a`` and bus bandwidth ``B`` (what nccl-tests reports as busbw), a collective of a
bucket of ``n`` bytes costs ``steps(p)·a + traffic(p)·n/B``:

========================  ===============  ===============  ======================
kind (bucket of n bytes)  ring steps       tree steps       traffic (bytes per n)
========================  ===============  ===============  ======================
all-reduce                2(p-1)           2·ceil(log2 p)   2(p-1)/p
all-gather (n: a share)   p-1              (ring)           p-1
reduce-scatter (n: all)   p-1              (ring)           (p-1)/p
broadcast                 p-1              (ring)           1
========================  ===============  ===============  ======================

nccl-tests reports ``busbw = algbw · bus(p)`` with ``algbw`` its size column over the time;
its size column is the bucket, except for all-gather, where it is the gathered buffer
(``p·n``). ``bus`` and ``size`` convert a measured time back to bus bandwidth.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

from ..errors import CostModelError
from ..model import CollectiveKind

__all__ = ["KindCost", "KINDS", "kind_cost", "steps", "bus_bandwidth_gbps", "Names", "NAMES",
           "KIND_OF_OP"]


class KindCost(NamedTuple):
    ring_steps: Callable[[int], float]
    tree_steps: Optional[Callable[[int], float]]  # None: the kind always runs as a ring
    traffic: Callable[[int], float]  # bytes on the busiest link per bucket byte, over B
    bus: Callable[[int], float]  # nccl-tests' busbw / algbw
    size: Callable[[int], int]  # nccl-tests' size column per bucket byte


KINDS: dict[CollectiveKind, KindCost] = {
    CollectiveKind.ALL_REDUCE: KindCost(lambda p: 2 * (p - 1), lambda p: 2 * math.ceil(math.log2(p)),
                                        lambda p: 2.0 * (p - 1) / p, lambda p: 2 * (p - 1) / p,
                                        lambda p: 1),
    CollectiveKind.ALL_GATHER: KindCost(lambda p: p - 1, None, lambda p: p - 1,
                                        lambda p: (p - 1) / p, lambda p: p),
    CollectiveKind.REDUCE_SCATTER: KindCost(lambda p: p - 1, None, lambda p: (p - 1) / p,
                                            lambda p: (p - 1) / p, lambda p: 1),
    CollectiveKind.BROADCAST: KindCost(lambda p: p - 1, None, lambda p: 1.0, lambda p: 1.0,
                                       lambda p: 1),
}


class Names(NamedTuple):
    """A collective's names outside tracecli: the ``collective OP`` argument (``op``),
    nccl-tests' binary (``binary``) and NCCL's ``ncclFunc`` (``nccl``)."""

    op: str
    binary: str
    nccl: str


NAMES: dict[CollectiveKind, Names] = {
    CollectiveKind.ALL_REDUCE: Names("allreduce", "all_reduce_perf", "AllReduce"),
    CollectiveKind.ALL_GATHER: Names("allgather", "all_gather_perf", "AllGather"),
    CollectiveKind.REDUCE_SCATTER: Names("reducescatter", "reduce_scatter_perf", "ReduceScatter"),
    CollectiveKind.BROADCAST: Names("broadcast", "broadcast_perf", "Broadcast"),
}
"""The one table of the collectives' outside names (``CollectiveKind`` values are tracecli's
own, as its JSON shows them)."""

KIND_OF_OP = {names.op: kind for kind, names in NAMES.items()}


def kind_cost(kind: CollectiveKind) -> KindCost:
    try:
        return KINDS[kind]
    except KeyError:
        raise CostModelError(f"no cost model for {getattr(kind, 'value', kind)} "
                        "collectives; known: " + ", ".join(k.value for k in KINDS)) from None


def steps(kind: CollectiveKind, p: int, algorithm: str) -> float:
    """Latency steps of ``kind`` on ``p`` ranks with ``algorithm`` (ring or tree).

    >>> steps(CollectiveKind.ALL_REDUCE, 8, "ring"), steps(CollectiveKind.ALL_REDUCE, 8, "tree")
    (14, 6)
    >>> steps(CollectiveKind.ALL_GATHER, 8, "tree")
    7
    """
    row = kind_cost(kind)
    if algorithm == "tree" and row.tree_steps is not None:
        return row.tree_steps(p)
    return row.ring_steps(p)


def bus_bandwidth_gbps(kind: CollectiveKind, nbytes: float, ms: float, p: int) -> float:
    """nccl-tests' busbw (GB/s) of a bucket of ``nbytes`` that took ``ms`` on ``p`` ranks.

    >>> round(bus_bandwidth_gbps(CollectiveKind.ALL_REDUCE, 1e9, 10.0, 4), 3)
    150.0
    """
    row = kind_cost(kind)
    return row.size(p) * nbytes / (ms / 1000.0) * row.bus(p) / 1e9
