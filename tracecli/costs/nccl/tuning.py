"""NCCL's latency/bandwidth table per (collective, algorithm, protocol).

A transcription of ``ncclTopoTuneModel`` (NVIDIA/nccl v2.30.7-1 ``src/graph/tuning.cc:243-438``:
per-channel bandwidth and its refinements 288-383, latencies 384-435, algorithm/protocol
enabling 440-541); the time of a pair at a size (``ncclTopoGetAlgoTime``) and the argmin
over the pairs are :mod:`.algotime`'s. The v2.23-v2.27 NVLS
bandwidth (``min(bwIntra, bwInter)``, algorithm bandwidth 5/6 of the bus) is v2.27.7-1
tuning.cc's; the v2.21-v2.22 formulas (``Constants.era == "2.21"``) are v2.22.3-1
tuning.cc:118-265 and 405-435. Constants per release: :mod:`.versions`. NCCL stores these values as C ``float``;
:func:`f32` rounds where it does, so the table prints as NCCL prints it (``%8.1f/%6.1f``).

The bytes NCCL charges (``ncclFuncMaxSendRecvCount``, src/include/enqueue.h:39-41): the buffer
for all-reduce and broadcast, the whole gathered buffer (``nRanks`` shares) for all-gather and
reduce-scatter.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Optional

from .versions import ALGOS, PROTOS, Constants

__all__ = ["FUNCS", "ALGOS", "PROTOS", "AlgoGraph", "Comm", "Table", "tune", "f32", "nvls_bw"]

FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
TREE, RING, CN_DIRECT, CN_CHAIN, NVLS, NVLS_TREE, PAT = range(7)
LL, LL128, SIMPLE = range(3)
NVLINK, PCI, NET = range(3)
OLD_ERAS = ("2.18", "2.19", "2.21")  # the formulas before v2.23 (versions.py)


_F32 = struct.Struct("f")  # compiled once: f32 runs ~800,000 times in a 100,000-gradient plan


def f32(x: float, _pack=_F32.pack, _unpack=_F32.unpack) -> float:
    """``x`` as a C float holds it.

    >>> f32(0.1) == 0.1, round(f32(0.1), 8)
    (False, 0.1)
    """
    return _unpack(_pack(x))[0]


@dataclass(frozen=True)
class AlgoGraph:
    """What NCCL's topology search found for one algorithm (``struct ncclTopoGraph``):
    channels, per-channel bandwidth inside a node and across nodes (GB/s), whether the
    intra-node links are NVLink (``typeIntra == LINK_NVL``), whether LL128 is allowed on its
    paths (tuning.cc:514-536), the network latency a plugin reports (µs), ``sameChannels``."""

    n_channels: int
    bw_intra: float
    bw_inter: float
    nvlink: bool = True
    ll128: bool = True
    latency_inter: float = 0.0
    same_channels: bool = True


NO_GRAPH = AlgoGraph(0, 0.0, 0.0)


@dataclass(frozen=True)
class Comm:
    """The communicator: ranks, nodes, the smallest compute capability (80 = A100), the CPU
    vendor (``intel``, ``amd``, ``other``), whether the tree graph has pattern TREE
    (``maxTreePattern``), NVLS and CollNet support, ``comm->nChannels`` (the ring-plateau test),
    and the graphs of each algorithm (``tree``, ``ring``, ``nvls``, ``collnet_direct``, ``collnet_chain``)."""

    n_ranks: int
    n_nodes: int
    compcap: int
    ring: AlgoGraph
    tree: AlgoGraph
    nvls: AlgoGraph = NO_GRAPH
    collnet_direct: AlgoGraph = NO_GRAPH
    collnet_chain: AlgoGraph = NO_GRAPH
    cpu: str = "intel"
    tree_pattern_tree: bool = False
    nvls_support: bool = False
    collnet: bool = False
    comm_channels: int = 0  # 0: twice the ring graph's channels (connect.cc channel doubling)
    pat: Optional[bool] = None  # None: NCCL's default (1 GPU per node, sm60+)

    def graph(self, a: int) -> AlgoGraph:
        return (self.tree, self.ring, self.collnet_direct, self.collnet_chain, self.nvls,
                self.nvls, self.tree)[a]

    @property
    def channels(self) -> int:
        return self.comm_channels or 2 * self.ring.n_channels


@dataclass
class Table:
    """``lat[f][a][p]`` (µs) and ``bw[f][a][p]`` (GB/s of algorithm bandwidth), as NCCL prints."""

    comm: Comm
    consts: Constants
    lat: list = field(default_factory=list)
    bw: list = field(default_factory=list)

    def row(self, func: str) -> list[tuple[str, str, float, float]]:
        f = FUNCS.index(func)
        return [(ALGOS[a], PROTOS[p], self.lat[f][a][p], self.bw[f][a][p])
                for a in range(len(ALGOS)) for p in range(3)]


def _log2i(n: int) -> int:
    return n.bit_length() - 1 if n > 0 else -1


@dataclass(frozen=True)
class _Setup:
    """What every cell of the table reads (tuning.cc:258-286): the per-channel caps of this
    compute capability and node count, ppn, the links each algorithm's latency uses, PAT on."""

    ll_max: float
    tree_max: float
    ring_ll128: float
    tree_ll128: float
    nvls_tree_max: float
    ppn: float
    cc: int
    intra_hw: tuple
    hw: tuple
    pat_on: bool
    overhead: float
    old: bool
    era: str


def _setup(comm: Comm, k: Constants) -> _Setup:
    nn = comm.n_nodes
    # v2.23-v2.24 have no Blackwell row: versions.py copies Hopper's there, as NCCL then did.
    cc = 3 if comm.compcap >= 100 else 2 if comm.compcap >= 90 else 1 if comm.compcap >= 80 else 0
    i2 = nn - 1 if nn <= 2 else 2
    i1 = cc if nn == 1 else (1 if comm.cpu in ("amd", "mixed") else 0)
    intra_hw = tuple(NVLINK if comm.graph(a).nvlink else PCI for a in range(7))
    return _Setup(k.ll_max[i1][i2], k.tree[cc][i2], k.ring_ll128[cc][i2], k.tree_ll128[cc][i2],
                  k.nvls_tree[cc][i2], f32(comm.n_ranks / nn), cc, intra_hw,
                  tuple(intra_hw[a] if nn == 1 else NET for a in range(7)),
                  comm.pat if comm.pat is not None else (nn == comm.n_ranks and comm.compcap >= 60),
                  2.0 if comm.cpu == "amd" else 1.0, k.era in OLD_ERAS, k.era)


def _cells(func: str, s: _Setup):
    """The (algorithm, protocol) pairs NCCL fills for ``func`` (tuning.cc:288-300, 325-329)."""
    ar, agrs = func == "AllReduce", func in ("AllGather", "ReduceScatter")
    for a in range(7):
        if func in ("Broadcast", "Reduce") and a != RING:
            continue
        if agrs and a not in (PAT, RING, NVLS, CN_DIRECT):
            continue
        if agrs and s.era == "2.18" and a != RING:  # v2.18.6-1 tuning.cc:168-169
            continue
        if (ar or s.old) and a == PAT:
            continue
        for p in range(3):
            if a in (NVLS, NVLS_TREE) and p != SIMPLE:
                continue
            if agrs and a == PAT and (p != SIMPLE or not s.pat_on):
                continue
            yield a, p


def tune(comm: Comm, k: Constants) -> Table:
    """NCCL's table for ``comm`` with the constants ``k`` (tuning.cc:243-541)."""
    s = _setup(comm, k)
    lat = [[[0.0] * 3 for _ in range(7)] for _ in FUNCS]
    bws = [[[0.0] * 3 for _ in range(7)] for _ in FUNCS]
    for f, func in enumerate(FUNCS):
        nr = comm.n_ranks
        nsteps = 2 * (nr - 1) if func == "AllReduce" else nr - 1 \
            if func in ("AllGather", "ReduceScatter") else nr
        for a, p in _cells(func, s):
            bus = _bus_bw(comm, k, s, func, a, p, nsteps)
            if bus is None:
                continue
            bws[f][a][p] = bus
            lat[f][a][p] = _latency(k, comm, a, p, f, nsteps, s.intra_hw, s.hw, s.ppn, s.overhead)
    _enable(comm, lat, bws, comm.n_nodes)
    return Table(comm, k, lat, bws)


def _bus_bw(comm: Comm, k: Constants, s: _Setup, func: str, a: int, p: int,
            nsteps: int) -> Optional[float]:
    """The algorithm bandwidth of one cell (tuning.cc:301-383); ``None``: NVLS without 2 channels."""
    nn, nr, g = comm.n_nodes, comm.n_ranks, comm.graph(a)
    ar, agrs, old = func == "AllReduce", func in ("AllGather", "ReduceScatter"), s.old
    collnet = a in (CN_DIRECT, CN_CHAIN)
    bw = f32(g.bw_intra if nn <= 2 or collnet else g.bw_inter)
    if a in (NVLS, NVLS_TREE):
        if g.n_channels < 2:
            return None
        bw = nvls_bw(k, g, a, ar, s.ppn, nn, s.cc, s.nvls_tree_max)
    bus = _protocol_bus(comm, s, a, p, func, f32(g.n_channels * bw), g.n_channels, old)
    if collnet and p != SIMPLE:
        bus = 0.0
    if a == CN_DIRECT and p == SIMPLE:
        bus = _collnet_direct_bus(comm, s, g, bus, bw, agrs, old)
    if a in (NVLS, CN_DIRECT) and p == SIMPLE and agrs and nn > 1 and not comm.collnet:
        bus = 0.0
    if not ((a == CN_DIRECT if old else a != RING) and agrs):
        if a == RING or (a in (NVLS, NVLS_TREE) and k.nvls_model == "2.28"):
            ratio = f32(1.0 * nr / nsteps)
        elif a == NVLS_TREE and k.era == "2.18":  # v2.18.6-1 tuning.cc:198
            ratio = f32(.70 * nn / (2 * (nn - 1))) if nn > 1 else math.inf  # C: x/0.0 = inf
        elif a in (NVLS, NVLS_TREE):
            ratio = f32(5.0 / 6.0)
        else:
            ratio = f32(.5)
        bus = f32(bus * ratio)
    return bus


def _protocol_bus(comm: Comm, s: _Setup, a: int, p: int, func: str, bus: float, nch: int,
                  old: bool) -> float:
    """Ring and tree refinements per protocol (tuning.cc:330-352; v2.20.5-1 tuning.cc:181 for
    the ring LL factor of 2.18-2.20: a quarter on several nodes, for all-reduce and reduce,
    else a third)."""
    ar = func == "AllReduce"
    if a == RING and p == LL:
        if s.era in ("2.18", "2.19"):
            quarter = comm.n_nodes > 1 or func in ("AllReduce", "Reduce")
            bus = f32(min(s.ll_max, bus * (1.0 / 4.0 if quarter else 1.0 / 3.0)))
        else:
            bus = f32(min(s.ll_max, bus * .5))
    if a == RING and p == LL128:
        bus = f32(min(bus * (0.7 if old and s.ppn < 2 else 0.92), nch * s.ring_ll128))
    if a == TREE and ar:
        bus = f32(min(bus * .92, nch * s.tree_max))
    if a == TREE and p == LL:
        bus = f32(min(bus * 1.0 / 3.8, s.ll_max))
    if a == TREE and p == LL128:
        bus = f32(min(bus * (7.0 / 9.0 if comm.n_nodes == 1 else 120.0 / 128.0), nch * s.tree_ll128))
    if a == TREE and comm.tree_pattern_tree:
        bus = f32(bus * .85)
    if a == PAT:
        bus = f32(bus * .75)
    return bus


def _collnet_direct_bus(comm: Comm, s: _Setup, g: AlgoGraph, bus: float, bw: float, agrs: bool,
                        old: bool) -> float:
    """CollNetDirect/Simple (tuning.cc:353-368; v2.22.3-1 tuning.cc:189-203 for ``old``)."""
    ppn = s.ppn
    if agrs and old:
        w = (ppn - 1) / (8 - 1)
        return f32(f32(ppn * bw) * (w * 0.85 + (1 - w) * 0.95))
    if agrs:
        return f32(ppn * min(g.bw_intra, f32(g.bw_inter * f32(0.9))))
    factor = ppn / (1.0 * max(g.n_channels, 1))
    factor -= (factor - 1) / 2
    bus = f32(bus / factor)
    if comm.compcap >= 90:
        bus = f32(bus * .85)
    return bus


def nvls_bw(k: Constants, g: AlgoGraph, a: int, ar: bool, ppn: float, nn: int, cc: int,
            cap: float) -> float:
    if k.era == "2.18":  # v2.18.6-1 tuning.cc:174: the graph's own bandwidth, no min
        return f32(g.bw_intra if nn <= 2 else g.bw_inter)
    if k.nvls_model == "2.23":  # v2.27.7-1 tuning.cc: NVLS min(intra, inter); NVLSTree halves inter > 2 nodes
        if a == NVLS:
            if ar or k.era in OLD_ERAS:
                return f32(min(g.bw_intra, g.bw_inter))
            return f32(min(g.bw_intra * (ppn - 1.0) / ppn, g.bw_inter * 0.9))
        return f32(min(g.bw_intra, g.bw_inter if nn <= 2 else g.bw_inter / 2))
    intra = f32(f32(g.bw_intra * k.nvls_eff[cc]) * (g.n_channels - 1) / g.n_channels)
    intra = f32(intra * 2.0) if ar else f32(intra * ((ppn - 1) / ppn))
    inter = f32(g.bw_inter * (2 if nn <= 2 and a == NVLS_TREE else 1))
    return f32(min(intra, inter, cap if a == NVLS_TREE else math.inf))


def _latency(k: Constants, comm: Comm, a: int, p: int, f: int, nsteps: int, intra_hw: list,
             hw: list, ppn: float, overhead: float) -> float:
    nn, nr, g, func = comm.n_nodes, comm.n_ranks, comm.graph(a), FUNCS[f]
    base = f32(k.base[a][p])
    intra = f32(k.hw[intra_hw[a]][a][p])
    old = k.era in OLD_ERAS  # v2.22.3-1: each algorithm's own network row; 2*nNodes ring steps
    inter = f32(k.hw[NET][TREE][p] if ppn == 1 and not old else k.hw[NET][a][p])
    inter = f32(inter + g.latency_inter)
    if p == SIMPLE:
        inter = f32(inter + g.latency_inter)
    if a == RING:
        step = f32(k.hw[hw[a]][a][p])
        if func in ("Reduce", "Broadcast"):
            if g.same_channels:
                return f32(base + step)
            if p == SIMPLE:
                step = f32(k.hw[hw[a]][TREE][p])
            return f32(base + nsteps * step)
        net = 0.0
        if nn > 1:
            net = overhead * (3 if p == SIMPLE else 1)
        intra = f32(max(intra, net))
        n_inter = 0 if nn == 1 else (2 * nn if old else 2 * (nn - 1)) if func == "AllReduce" else nn - 1
        return f32(base + f32(f32((nsteps - n_inter) * intra) + f32(n_inter * inter)))
    local = nr // nn
    if a == TREE:
        if func == "AllReduce" or old:
            return f32(base + 2 * f32(f32((local - 1) * intra) + f32(_log2i(nn) * inter)))
        return base
    if a == CN_DIRECT:
        return f32(base + f32(2 * (min(1, local - 1) * intra + (local - 1) * 0.4) + inter))
    if a == CN_CHAIN:
        return f32(base + f32(2 * (local - 1) * intra + inter))
    if a == NVLS and k.era == "2.18":  # v2.18.6-1 tuning.cc:236: base 23 plus the network row
        return f32(base + k.hw[NET][a][p]) if nn > 1 else base
    if a == NVLS:
        return f32(intra + inter) if nn > 1 else intra
    if a == NVLS_TREE and k.era == "2.18":  # v2.18.6-1 tuning.cc:238: 2(nNodes-1) network hops
        return f32(base + f32(2 * (nn - 1) * k.hw[NET][a][p]))
    if a == NVLS_TREE:
        return f32(base + f32(intra + 2 * _log2i(nn) * inter))
    if a == PAT and func in ("AllGather", "ReduceScatter"):
        return f32(base + f32(_log2i(nn) * (inter / 3.5) + nr * 2.8))
    return base


def _enable(comm: Comm, lat: list, bws: list, nn: int) -> None:
    """tuning.cc:496-541: NVLSTree off on one node, CollNet (and multi-node NVLS) off without
    CollNet, LL128 only where the graph allows it; a disabled pair keeps its latency, bw 0."""
    for f in range(len(FUNCS)):
        for a in range(7):
            off = (nn == 1 and a == NVLS_TREE) or (not comm.collnet and (
                a in (CN_DIRECT, CN_CHAIN) or (a == NVLS and nn > 1)))
            for p in range(3):
                if off or (p == LL128 and not (comm.graph(a).ll128 and comm.compcap >= 70)):
                    bws[f][a][p] = 0.0
