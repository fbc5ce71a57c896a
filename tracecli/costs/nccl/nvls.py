"""Whether NCCL enables NVLS (NVLink SHARP) on a topology, and the NVLS graph its search would find.

When (NVIDIA/nccl v2.30.7-1 unless a tag is named):

- ``ncclNvlsInit`` (src/transport/nvls.cc:248-280): off when ``NCCL_NVLS_ENABLE`` is 0 (default
  2, nvls.cc:159) or the node has fewer than 2 GPUs of the communicator (``gpuCount < 2``,
  nvls.cc:262; up to v2.28.3-1 ``gpuCount <= 2``, v2.28.3-1 nvls.cc:160 and v2.21.5-1
  nvls.cc:241: 2 GPUs a node never got NVLS); otherwise on where the driver reports
  ``CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED`` (nvls.cc:270-274). tracecli cannot see the driver:
  it takes multicast as supported on an NVSwitch node of compute capability 9.0 or more (CUDA
  12.1+ driver and fabric manager running, as on DGX/HGX H100, H200, B200) and says so.
- ``ncclTopoCompute`` (src/graph/search.cc:1124): no NVLS graph without an NVSwitch in the
  topology or below compute capability 9.0; no graph means no NVLS
  (``graphs[NVLS]->nChannels == 0`` → ``nvlsSupport = 0``, src/init.cc:1453). So: A100 never,
  PCIe nodes never, one GPU per node never.
- On several nodes plain NVLS needs CollNet (SHARP), else only NVLS_TREE runs
  (src/graph/tuning.cc:503-505, src/enqueue.cc:2008); NVLS_TREE is off on one node
  (tuning.cc:502). tracecli models no CollNet, so: NVLS on one node, NVLS_TREE on several.
  NVLS also needs a reduction the multicast hardware supports (``ncclNvlsSupported``,
  enqueue.cc:425-426: sum/min/max on the float and integer types gradients use).

The graph (``NCCL_TOPO_PATTERN_NVLS``): each channel has one head GPU; every GPU moves the
channel's ``bwIntra`` to and from the NVSwitch, the head twice (``ncclTopoSearchTryNvls``,
search.cc:410-443). The search takes as many channels as it can, up to
``min(NCCL_MAX_NVLS_ARITY = 32, GPUs)`` (search.cc:1126-1128, 447-455; a graph with more
channels, or more ``nChannels·bwInter``, wins), never duplicates them (search.cc:1038), and:

- on one node it must have one channel per GPU (search.cc:1135-1138) and tries speeds from the
  intra list, highest first: so ``bwIntra`` is the highest speed with ``(GPUs + 1)·bwIntra``
  within a GPU's NVLink bandwidth. Pass 2 then raises ``bwInter`` (which no link checks on one
  node) a step at a time while it is below ``2·bwIntra`` (search.cc:1274-1277);
  8 H100: 8 channels, 40/60 GB/s (NVIDIA/nccl#1197 prints ``Pattern 5, crossNic 0, nChannels
  8, bw 40.000000/60.000000`` for such a node); 8 B200: 8 channels, 80/90.
- on several nodes it starts from the NICs: one channel per NIC whose local GPU is not yet a
  head (search.cc:730-770), the NIC and its PCIe path carrying ``bwInter``; speeds come from
  the inter list, from the fastest a NIC path carries, down while no graph has all its
  channels (search.cc:1244-1248, 635). Pass 2 raises ``bwInter`` as on one node, as far as the
  NIC path allows. 8 H100 with 8 x 400 Gb/s NICs: 8 channels, 40/48; with 8 x 200 Gb/s: 24/24.

This is an ESTIMATE like :func:`~.graph.search_graphs`: it assumes one NIC per GPU at most (a
distinct local GPU per NIC), NIC paths as fast as the GPU's PCIe link, no MNNVL. The cost
model reads only the graph's ``nChannels``, ``bwIntra`` and ``bwInter`` (tuning.cc:306-324);
``comm->nvlsChannels`` (16 on sm90, 24 on one sm100 node, 32 on several, nvls.cc:155-213;
``NCCL_NVLS_NCHANNELS`` default 16 up to v2.24, v2.21.5-1 nvls.cc:232) sets only how many
CTAs run an NVLS collective (enqueue.cc:2084-2089), not its predicted time.
"""

from __future__ import annotations

import math
from typing import Optional

from .graph import SPEEDS_INTER, SPEEDS_INTRA, Gpu, _speeds
from .tuning import AlgoGraph
from .versions import parse_version

__all__ = ["nvls_support", "search_nvls", "MAX_NVLS_ARITY"]

MAX_NVLS_ARITY = 32  # NCCL_MAX_NVLS_ARITY, src/include/device.h:213


def nvls_support(gpu: Gpu, gpus_per_node: int, nvswitch: bool, version: str) -> tuple[bool, str]:
    """``(on, why)``: whether NCCL ``version`` enables NVLS on nodes of ``gpus_per_node`` ``gpu``.

    >>> from .graph import GPUS
    >>> nvls_support(GPUS["h100"], 8, True, "2.30.7")[0], nvls_support(GPUS["a100"], 8, True, "2.30.7")[0]
    (True, False)
    >>> nvls_support(GPUS["h100"], 2, True, "2.27.7")
    (False, 'NCCL 2.27.7 needs more than 2 GPUs a node for NVLS (nvls.cc gpuCount <= 2)')
    """
    if gpu.compcap < 90:
        return False, f"{gpu.name} (sm{gpu.compcap}) has no NVLS: NCCL needs compute capability 9.0+"
    if not nvswitch:
        return False, "no NVSwitch: NVLS needs NVSwitch multicast (search.cc NVS count 0)"
    v = parse_version(version) or (99, 0, 0)
    least = 3 if v <= (2, 28, 3) else 2  # v2.28.3-1 nvls.cc:160 `<= 2`, v2.28.7-1 nvls.cc:161 `< 2`
    if gpus_per_node < least:
        rule = "gpuCount <= 2" if least == 3 else "gpuCount < 2"
        return False, (f"NCCL {version} needs {'more than 2 GPUs' if least == 3 else '2 GPUs or more'}"
                       f" a node for NVLS (nvls.cc {rule})")
    return True, "NVSwitch multicast on sm90+ (assumed available: driver and fabric manager)"


def _channels_at(speed: float, nvlink: float, most: int) -> int:
    """Channels of ``speed`` a GPU's NVLink carries, each GPU once a head (twice the traffic)."""
    return max(0, min(most, int(math.floor(nvlink / speed + 1e-9)) - 1))


def search_nvls(gpu: Gpu, gpus_per_node: int, nodes: int, nvswitch: bool, nic_gbps: float,
                nics: int, version: str) -> Optional[AlgoGraph]:
    """The NVLS graph NCCL's search would find, or ``None`` where NCCL runs no NVLS.

    >>> from .graph import GPUS
    >>> g = search_nvls(GPUS["h100"], 8, 1, True, 0, 0, "2.30.7")
    >>> g.n_channels, g.bw_intra, g.bw_inter
    (8, 40.0, 60.0)
    >>> g = search_nvls(GPUS["h100"], 8, 2, True, 3200, 8, "2.30.7")
    >>> g.n_channels, g.bw_intra, g.bw_inter
    (8, 40.0, 48.0)
    >>> search_nvls(GPUS["h100"], 8, 1, False, 0, 0, "2.30.7") is None
    True
    """
    if not nvls_support(gpu, gpus_per_node, nvswitch, version)[0]:
        return None
    nvlink = gpu.nvlink_gbps
    most = min(MAX_NVLS_ARITY, gpus_per_node)
    if nodes == 1:
        speeds = _speeds(gpu.compcap, SPEEDS_INTRA)
        intra = next((s for s in speeds if _channels_at(s, nvlink, most) >= most), None)
        if intra is None:
            return None
        channels, path = most, math.inf
    else:
        speeds = _speeds(gpu.compcap, SPEEDS_INTER)
        most = min(most, max(nics, 0))
        path = min(nic_gbps / 8.0 / max(nics, 1), gpu.pcie_gbps)  # a NIC, and its PCIe path
        best = (0, 0.0)
        for s in (s for s in speeds if s <= path + 1e-9):
            if best[0] and s / best[1] <= 0.49:  # search.cc:1244: stop decreasing past half
                break
            c = _channels_at(s, nvlink, most)
            if c > best[0] or c * s > best[0] * best[1]:
                best = (c, s)
            if c == most:  # all channels: "optimal", search.cc:635
                break
        channels, intra = best
        if channels == 0:
            return None
    inter = intra
    up = [s for s in reversed(speeds) if s > inter]  # pass 2: raise bwInter a step at a time
    for s in up:
        if inter >= 2 * intra or s > path + 1e-9:
            break
        inter = s
    return AlgoGraph(channels, intra, inter, nvlink=True, ll128=True)
