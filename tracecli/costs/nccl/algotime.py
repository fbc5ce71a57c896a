"""NCCL's model time of one (algorithm, protocol) at a size and the argmin over the pairs:
``ncclTopoGetAlgoTime`` (NVIDIA/nccl v2.30.7-1 ``src/graph/tuning.cc:629-655``: the tree
correction on the bandwidth, the ring plateau on the latency, ``time = lat + bytes / (1000 ·
bw)``) and the argmin of ``topoGetAlgoInfo`` (src/enqueue.cc:2028-2048; which algorithms
take part: ``updateCollCostTable``, enqueue.cc:1989-2026), over the table :func:`.tuning.tune`
makes. C ``float`` arithmetic, step by step (:func:`.tuning.f32`).

The size enters the latency and bandwidth only through its class: ``log2(bytes / 64)``
where a correction reads it (0 to 23) and whether a ring's plateau applies. A plan asks for
thousands of sizes, so each class's terms are computed once and kept on the table (dropped
where :func:`.forced.apply` changes it); a size then costs the last division and sum.

>>> from .tuning import AlgoGraph, Comm, tune
>>> from .versions import constants_for
>>> g = AlgoGraph(16, 40.0, 40.0)
>>> table = tune(Comm(16, 2, 90, g, g), constants_for("2.30.7"))
>>> [best(table, "AllReduce", n)[1:] for n in (1024, 1 << 30)]  # Tree LL, then Ring Simple
[(0, 0), (1, 2)]
"""

from __future__ import annotations

import math

from .tuning import CN_CHAIN, CN_DIRECT, FUNCS, NVLS, NVLS_TREE, RING, SIMPLE, TREE, Table, f32
from .tuning import _F32

_pack, _unpack = _F32.pack, _F32.unpack  # f32, inline where it runs a million times

__all__ = ["algo_terms", "algo_time", "best", "candidates"]

def _memo(table: Table) -> dict:
    """The table's cache: candidates per collective, terms per size class."""
    return table.__dict__.setdefault("_memo", {})


def _class(table: Table, nbytes: int) -> tuple[int, bool]:
    """The size class of ``nbytes``: ``(log2(bytes / 64) where a correction reads it, 0 to
    23, else -1; whether a ring's plateau applies)`` (no channels: no plateau, where NCCL's
    test would divide by 0; its ring then has no bandwidth)."""
    comm = table.comm
    per = comm.channels * comm.n_ranks
    log_size = (nbytes >> 6).bit_length() - 1 if nbytes >> 6 > 0 else -1
    return (log_size if log_size < 24 else -1), per > 0 and nbytes // per >= 64


def _terms(table: Table, func: str, a: int, p: int, log_size: int,
           plateau: bool) -> tuple[float, float]:
    """:func:`algo_terms` of a size class (:func:`_class`)."""
    f = FUNCS.index(func)
    bw, lat = table.bw[f][a][p], table.lat[f][a][p]
    if bw == 0:
        return lat, 0.0
    comm, k = table.comm, table.consts
    corr = k.tree_correction[p]
    if a == TREE and func == "AllReduce" and 0 <= log_size < 23:
        bw = f32(bw * corr[log_size])
    if (a == NVLS_TREE and k.nvls_tree_correction and func == "AllReduce" and 0 <= log_size < 24
            and comm.compcap >= 100 and comm.cpu in ("intel", "amd")):
        bw = f32(bw * corr[log_size])
    if (a == RING and p == SIMPLE and comm.n_nodes > 1 and func == "AllReduce"
            and plateau):
        lat = f32(lat * (1.9 if comm.compcap < 80 else 1.4))
    return lat, bw


def algo_terms(table: Table, func: str, a: int, p: int, nbytes: int) -> tuple[float, float]:
    """``(latency µs, algorithm bandwidth GB/s)`` ``ncclTopoGetAlgoTime`` combines for this
    size (tuning.cc:629-652: the tree correction on the bandwidth, the ring plateau on the
    latency); bandwidth 0 where the pair is disabled."""
    cls = _class(table, nbytes)
    memo = _memo(table)
    key = (func, a, p, cls)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _terms(table, func, a, p, *cls)
    return hit


def algo_time(table: Table, func: str, a: int, p: int, nbytes: int, pipe_ops: int = 1) -> float:
    """``ncclTopoGetAlgoTime`` (tuning.cc:629-655): µs, or -1 where the pair is disabled."""
    lat, bw = algo_terms(table, func, a, p, nbytes)
    if bw == 0:
        return -1.0
    count = pipe_ops if a == RING else -(-pipe_ops // 8)
    # C float arithmetic, step by step: nBytes (size_t) becomes a float before the division.
    return f32(f32(lat * count) + f32(f32(nbytes) / f32(1000 * bw)))


def candidates(table: Table, func: str) -> list[tuple[int, int]]:
    """The pairs :func:`best` weighs for ``func`` in NCCL's order (enqueue.cc:2028-2048)."""
    memo = _memo(table)
    hit = memo.get(func)
    if hit is None:
        comm, f = table.comm, FUNCS.index(func)
        hit = []
        for a in range(7):
            if a in (CN_DIRECT, CN_CHAIN) and not comm.collnet:
                continue
            if a in (NVLS, NVLS_TREE) and not comm.nvls_support:
                continue
            if a == NVLS and comm.n_nodes > 1 and not comm.collnet:
                continue
            hit += [(a, p) for p in range(3) if table.bw[f][a][p] != 0]
        memo[func] = hit
    return hit


def _priced(table: Table, func: str, nbytes: int) -> list[tuple[int, int, float, float]]:
    """``[(algorithm, protocol, f32(latency), f32(1000 · bandwidth)), ...]`` of ``func``'s
    candidates enabled at the size class of ``nbytes``, in NCCL's order."""
    memo = _memo(table)
    key = (func, _class(table, nbytes))
    hit = memo.get(key)
    if hit is None:
        hit = []
        for a, p in candidates(table, func):
            lat, bw = algo_terms(table, func, a, p, nbytes)
            if bw != 0:  # algo_time's -1: never picked
                hit.append((a, p, f32(lat * 1), f32(1000 * bw)))  # pipe_ops 1: count 1
        memo[key] = hit
    return hit


def best(table: Table, func: str, nbytes: int) -> tuple[float, int, int]:
    """``(µs, algorithm, protocol)`` NCCL's argmin picks (enqueue.cc:2028-2048): the first
    enabled pair of least time (:func:`algo_time`), algorithms in enum order, NVLS only
    where supported."""
    best_t, best_a, best_p = math.inf, -1, -1
    x = f32(nbytes)
    for a, p, lat, per in _priced(table, func, nbytes):
        t = _unpack(_pack(lat + _unpack(_pack(x / per))[0]))[0]  # f32(lat + f32(x / per))
        if 0.0 <= t < best_t:
            best_t, best_a, best_p = t, a, p
    return best_t, best_a, best_p
