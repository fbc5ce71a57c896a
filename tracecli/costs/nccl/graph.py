"""The graph values NCCL's topology search would pick: channels and per-channel bandwidth.

NCCL's time model reads, per algorithm, only ``nChannels``, ``bwIntra``, ``bwInter`` (GB/s a
channel), whether the intra-node links are NVLink, whether LL128 is allowed and the plugin's
network latency (src/graph/tuning.cc:243-438). Those come from the search in
src/graph/search.cc, which tries per-channel speeds from a list, highest first
(v2.30.7-1 search.cc:1051-1067: sm<90 intra {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3},
inter {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12}; sm90 intra
{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3}, inter {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15,
12, 6, 3, 2.4, 1.2, 0.24, 0.12}; sm100 intra {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18},
inter {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}),
and doubles channels at half the speed when the speed is 25 GB/s or more
(``ncclTopoDupChannels``, search.cc:1036-1049). Link bandwidths: NVLink per lane
(src/graph/topo.h:19-24: sm80 20.0, sm90 20.6, sm100 40.1 GB/s), PCIe ``width·speed/80``
(topo.cc:545-556), a NIC ``Mb/s / 8000`` (topo.cc:416-418).

:func:`search_graphs` is an ESTIMATE of that search, not the search: it gives each GPU's
bandwidth to the fastest speed the list allows for as many channels as fit (at most 16 before
doubling), and the network its NIC bandwidth per node shared by the node's channels. It does
not see PCIe switches, NUMA, rails or NIC placement, so a real machine can differ: take the
graph from a real log (:mod:`.nccllog`, ``Pattern ... nChannels ... bw ...``) where you have one.

The tree graph (src/init.cc:1180-1186: pattern BALANCED_TREE, as many channels as the ring) is
the ring's on one node: the same speeds fit the same channels, and pass 2 cannot raise its
``bwIntra`` past what the NVLink carries (NVIDIA/nccl#1197 prints 12 x 30/30 GB/s for both on
8 H100). On several nodes it differs in two ways, both estimated here: pass 2 raises the
tree's ``bwIntra`` alone, a speed at a time, while it is below ``2·bwInter`` and the NVLink
carries it (search.cc:1278-1281; tuning.cc reads ``bwIntra`` on 2 nodes, ``bwInter`` on more,
so only 2 nodes see it), and on sm90+ a GPU-per-NIC node falls back to pattern TREE
(search.cc:1215-1218; tuning.cc:336, factor 0.85): the 3 x 8 H100 log of
NVIDIA/nccl#1453 is reproduced only with pattern TREE (tests/costs/test_nccl_tuning.py).

The NVLS graph and when NCCL enables NVLS: :mod:`.nvls`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .tuning import AlgoGraph

__all__ = ["GPUS", "Gpu", "search_graphs", "tree_pattern_is_tree", "SPEEDS_INTRA", "SPEEDS_INTER",
           "MESH_GPUS", "NIC_PATHS", "nic_allows_ll128"]

# the PCIe path from a GPU to its NIC as NCCL types a graph's typeInter (src/graph/topo.h,
# nearest first): the NIC on the GPU's PCIe switch, behind more switches, reached through
# another GPU (PXN), through the CPU's host bridge, across CPU sockets
NIC_PATHS = ("pix", "pxb", "pxn", "phb", "sys")

SPEEDS_INTRA = {80: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
                90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}
SPEEDS_INTER = {80: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0,
                     4.0, 3.0, 2.4, 1.2, 0.24, 0.12),
                90: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                     2.4, 1.2, 0.24, 0.12),
                100: (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                      15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)}
MAX_SEARCH_CHANNELS = 16
MESH_GPUS = 4  # an NVLink mesh with every pair linked: the 4-GPU boards (search_graphs' mesh)


@dataclass(frozen=True)
class Gpu:
    """A GPU as NCCL sees it: compute capability, NVLink lanes and GB/s per lane (topo.h)."""

    name: str
    compcap: int
    nvlink_lanes: int
    nvlink_lane_gbps: float
    pcie_gbps: float  # PCIe x16 as NCCL computes it: gen4 24, gen5 48 GB/s (topo.cc:545-556)

    @property
    def nvlink_gbps(self) -> float:
        return self.nvlink_lanes * self.nvlink_lane_gbps


# Lanes: V100 SXM2 6 (NVLink 2), A100 SXM 12 (NVLink 3), H100/H200 SXM and GH200's H100 18
# (NVLink 4, 900 GB/s), B200 18 (NVLink 5): NVIDIA's product pages; per lane: topo.h:20-24.
GPUS = {g.name: g for g in (
    Gpu("v100", 70, 6, 20.0, 12.0), Gpu("a100", 80, 12, 20.0, 24.0),
    Gpu("h100", 90, 18, 20.6, 48.0), Gpu("h200", 90, 18, 20.6, 48.0),
    Gpu("gh200", 90, 18, 20.6, 48.0),
    Gpu("b200", 100, 18, 40.1, 48.0),
)}


def _speeds(compcap: int, table: dict) -> tuple[float, ...]:
    return table[100] if compcap >= 100 else table[90] if compcap >= 90 else table[80]


def _fit(total: float, speeds: tuple[float, ...], channels: int) -> float:
    """The highest speed of ``speeds`` at which ``channels`` channels fit in ``total``."""
    for s in speeds:
        if s * channels <= total + 1e-9:
            return s
    return speeds[-1]


def search_graphs(gpu: Gpu, gpus_per_node: int, nodes: int, nvswitch: bool,
                  nic_gbps: float, nics: int, mesh: bool = False) -> tuple[AlgoGraph, AlgoGraph]:
    """``(ring, tree)`` graphs estimated from the search rules (see the module docstring).

    ``mesh``: the node's GPUs are on a board of :data:`MESH_GPUS` linked to each other by
    NVLink without an NVSwitch, every pair alike (a 4-GPU HGX A100 board, CSCS Alps' four
    GH200): a GPU's lanes are split among its 3 peers, a channel's ring sends to one peer, and
    channels on rings of other orders send to the others (NCCL's search takes a link's
    bandwidth off as each channel uses it, search.cc ``ncclTopoFollowPath``), so the channels
    share the lanes to the peers in use, each at no more than one peer's share: all of them
    on 4 GPUs, as on an NVSwitch; on 2 GPUs of the board, one link.

    >>> ring, tree = search_graphs(GPUS["a100"], 8, 1, True, 1600, 8)
    >>> ring.n_channels, ring.bw_intra, ring.n_channels * ring.bw_intra
    (12, 20.0, 240.0)
    >>> ring, _ = search_graphs(GPUS["h100"], 4, 1, False, 0, 0, mesh=True)
    >>> ring.n_channels * ring.bw_intra, ring.nvlink
    (360.0, True)
    >>> ring, _ = search_graphs(GPUS["h100"], 2, 1, False, 0, 0, mesh=True)
    >>> ring.n_channels * ring.bw_intra   # one link of 6 lanes: 123.6 GB/s
    121.0
    """
    nvlink = nvswitch or mesh
    intra_total = gpu.nvlink_gbps if nvlink else gpu.pcie_gbps
    intra_speeds = _speeds(gpu.compcap, SPEEDS_INTRA)
    if mesh and not nvswitch and gpus_per_node > 1:  # a channel at most one peer's lanes
        per_peer = gpu.nvlink_gbps / (MESH_GPUS - 1)
        intra_total = per_peer * min(gpus_per_node - 1, MESH_GPUS - 1)
        intra_speeds = tuple(s for s in intra_speeds if s <= per_peer + 1e-9) or intra_speeds[-1:]
    if gpus_per_node == 1:
        intra_total = math.inf
    best = (0.0, 0, 0.0)
    for channels in range(1, MAX_SEARCH_CHANNELS + 1):
        s = _fit(intra_total, intra_speeds, channels)
        if s * channels > best[0] + 1e-9:
            best = (s * channels, channels, s)
    _, channels, s_intra = best
    s_inter = s_intra
    if nodes > 1:  # one channel per NIC, at the speed both a NIC and the GPU's links carry
        inter_speeds = _speeds(gpu.compcap, SPEEDS_INTER)
        channels = min(max(nics, 1), MAX_SEARCH_CHANNELS)
        per_nic = nic_gbps / 8.0 / max(nics, 1)  # Gb/s summed over the NICs -> GB/s a NIC
        s_inter = min(_fit(per_nic, inter_speeds, 1), _fit(intra_total, inter_speeds, channels))
        s_intra = s_inter
    if s_intra >= 25.0 and not (gpu.compcap > 80 and s_intra < 50.0 and channels > 4):
        channels, s_intra, s_inter = 2 * channels, s_intra / 2, s_inter / 2  # ncclTopoDupChannels
    ll128 = nvlink or gpus_per_node == 1  # LL128 needs typeIntra <= NVB (tuning.cc)
    ring = AlgoGraph(channels, s_intra, s_inter, nvlink=nvlink, ll128=ll128)
    if nodes == 1 or gpus_per_node == 1:
        return ring, ring
    tree_intra = s_inter  # pass 2 raises a tree's bwIntra alone while below 2 bwInter
    for s in sorted(x for x in _speeds(gpu.compcap, SPEEDS_INTER) if x > s_inter):
        if tree_intra >= 2 * s_inter or s * channels > intra_total + 1e-9:
            break
        tree_intra = s
    return ring, AlgoGraph(channels, tree_intra, s_inter, nvlink=nvlink, ll128=ll128)


def tree_pattern_is_tree(gpu: Gpu, nodes: int) -> bool:
    """Whether the tree graph ends with pattern TREE (``maxTreePattern``, tuning.cc's 0.85):
    on several nodes of sm90+, where a balanced tree (two GPUs sharing a NIC) fails on a
    GPU-per-NIC node and the search falls back to a simple tree (search.cc:1215-1218)."""
    return nodes > 1 and gpu.compcap >= 90


def nic_allows_ll128(compcap: int, nic_path: str) -> bool:
    """Whether NCCL enables LL128 (by default) on a graph whose ``typeInter`` is ``nic_path``:
    up to PXN on compute capability 9.0+, up to PXB before (v2.18.3-1 src/graph/tuning.cc:285;
    from 2.27.3 under ``NCCL_LL128_C2C``, default 1: v2.27.3-1 tuning.cc:211, 460, which also
    lets sm90 reach P2C, a path none of these five names; v2.30.7-1 tuning.cc:518-526).

    >>> nic_allows_ll128(80, "pxb"), nic_allows_ll128(80, "pxn"), nic_allows_ll128(90, "pxn")
    (True, False, True)
    >>> nic_allows_ll128(90, "phb"), nic_allows_ll128(100, "sys")
    (False, False)
    """
    return NIC_PATHS.index(nic_path) <= NIC_PATHS.index("pxn" if compcap >= 90 else "pxb")
