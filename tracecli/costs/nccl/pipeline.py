"""The fill of NCCL's NVLS and NVLSTree pipelines: what a collective of a few MiB pays before
its chunks stream (the time model's ramp, :func:`.timing.features`).

Read from NVIDIA/nccl v2.30.7-1 (the chunk rules are the same from v2.18.3-1 on, v2.18.3-1
src/enqueue.cc:1336-1352):

- **stages**: NVLS all-reduce runs each chunk through three warp groups one after another:
  scatter into the NVLS buffer, reduce and multicast (``multimem`` load-reduce and store), gather
  out (src/device/all_reduce.h:390-465: ``scatterWarps``, ``reduceWarps``, ``gatherWarps``).
  NVLSTree puts the network tree between the reduce and the broadcast: reduce and send up,
  receive from the network and broadcast (all_reduce.h:527-640), ``log2(nNodes)`` tree levels
  up and as many down. A chunk's first stage starts the pipeline; each further stage is a
  chunk's time before the last stage runs: :data:`FILL_STAGES` beyond the first, 2 for NVLS and
  ``2 + 2·ceil(log2(nNodes))`` for NVLSTree.
- **the chunk** (``calcCollChunking``, src/enqueue.cc:2222-2288; :func:`first_chunk`), before
  it is SHRUNK at mid sizes so every channel gets several: NVLS to 64/32/16 KiB below 64/8/2
  loops of ``nChannels × nHeads × chunk``, NVLSTree to 256/128/64/32 KiB below 32/16/4/1 of
  them. It starts at the Simple buffer's step, ``NCCL_BUFFSIZE / NCCL_STEPS`` (4 MiB / 8 =
  512 KiB by default, src/init.cc:813-827, enqueue.cc:2222-2225), and then, release by
  release:

  - **NVLS**: capped at 128 KiB up to 2.20 (v2.18.3-1 enqueue.cc:1339, v2.20.3-1:1704); from
    2.21 at ``comm->nvlsChunkSize``, ``NCCL_NVLS_CHUNKSIZE`` (default 128 KiB, v2.21.5-1
    src/transport/nvls.cc:233, 310, enqueue.cc:1743; v2.30.7-1 nvls.cc:160, 224, enqueue.cc:2263).
  - **NVLSTree**: 2.18 runs the step itself (v2.18.3-1 enqueue.cc:1347-1352: 512 KiB by
    default); 2.19 too, but 64 KiB from 4 nodes (v2.19.3-1 enqueue.cc:1372); 2.20 the step,
    at most ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` (unset: 64 KiB from 4 nodes, else no cap,
    v2.20.3-1 enqueue.cc:1681, 1715-1717); from 2.21 ``nvlsChunkSize``, at most that setting
    (unset: the same rule, v2.21.5-1 enqueue.cc:1720, 1754-1757; v2.30.7-1 nvls.cc:161,
    227-232, enqueue.cc:2281).

  aws-ofi-nccl sets ``NCCL_BUFFSIZE`` to 8 MiB and, on p5 and later, both chunk settings to
  512 KiB where the job leaves them unset (:mod:`.ofi_env`): NVLSTree chunks of 512 KiB on any
  node count. A job's own ``NCCL_BUFFSIZE`` moves the step: NVLS's chunk where the step is
  below its cap, NVLSTree's up to 2.20 (what else it moves, the time model has no term for:
  :mod:`.ofi_env`). NCCL 2.28+'s sm100 multi-node tuning of the chunk (nvls.cc:163-201) is not
  modelled where the job or the plugin sets neither.
- **the loop**: one pass of the device's loop moves ``nHeads`` chunks a channel
  (``loopCount = nvls->nHeads * chunkSize``, all_reduce.h:414) on ``comm->nvlsChannels``
  channels (enqueue.cc:2084-2089): 16 on sm90, on sm100 24 on one node and 32 on several
  (nvls.cc:155-157, 208-214; NCCL 2.28+'s sm100 multi-node tuning may pick 24, nvls.cc:163-201:
  not modelled); ``nHeads`` is the NVLS graph's channel count (src/graph/connect.cc:248-261).

The fill is then ``stages × min(bytes, loop)`` bytes at NCCL's bandwidth: a collective of
several loops pays it once, one smaller than a loop pays it on all its bytes (its chunks are
the loop's).

- **the fill's rate on more than two nodes** (:func:`fill_scale`): NCCL halves NVLSTree's
  network bandwidth beyond two nodes (``min(bwIntra, nNodes <= 2 ? bwInter : bwInter/2)``,
  v2.19.3-1 to v2.27.7-1 tuning.cc, v2.24.3-1 tuning.cc:246; from 2.28 the same as doubling it
  on two nodes, v2.30.7-1 tuning.cc:320). That is the steady state of its double binary tree
  (the NVLS channels alternate the two trees of ``ncclGetDtree``, v2.24.3-1
  src/graph/connect.cc:271-313, trees.cc:88): on four nodes a node inside one tree carries, per
  loop, two children's chunks going up, its parent's coming down and its own in the other
  tree, twice the two-node load on its NIC. The fill is ONE loop crossing the tree once, up
  and then down, never both at a time: no hop of it carries more than one loop a NIC, the
  two-node load, and its NVLink stages do not depend on the nodes at all. So the fill is
  priced at the bandwidth NCCL gives the same graph on two nodes: its bytes are scaled by
  NCCL's bandwidth on ``nodes`` over that one (0.6 for 4 x 8 H100 on 2.24:
  ``min(40, 48/2) / min(40, 48)``); on two nodes and for NVLS it is 1.

A ring moves all its ranks in lockstep (each step's send needs the previous step's
receive, all_reduce.h:42-80) and a tree's chunk shrinking (enqueue.cc:2289-2297) keeps its
pipeline full: neither is given a fill (docs/nccl-time-model.md: fitted, both came out near 0).

>>> chunk_bytes("NVLS", 16 << 20, 16 * 8, 1)  # 16 MiB on 16 channels x 8 heads: 32 KiB chunks
32768
>>> loop_bytes("NVLSTree", 64 << 20, 16, 2, 8)  # 128 KiB x 16 channels x 8 heads
16777216
>>> fill_bytes("NVLSTree", 1 << 30, 80, 2, 8), fill_bytes("Ring", 1 << 30, 90, 2, 8)
(67108864, 0)
>>> fill_bytes("NVLSTree", 1 << 30, 90, 2, 8, "2.22.3", chunking=(8 << 20, 512 << 10, 512 << 10))
134217728
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from .channels import nvls_channels as of_release
from .tuning import ALGOS, AlgoGraph, nvls_bw
from .versions import constants_for, parse_version

__all__ = ["chunk_bytes", "loop_bytes", "fill_bytes", "fill_scale", "nvls_channels", "NVLS_CHUNK",
           "first_chunk", "Chunking", "DEFAULT_CHUNKING", "DEFAULT_BUFFSIZE"]

NVLS_CHUNK = 128 * 1024  # NCCL_NVLS_CHUNKSIZE default, nvls.cc:160
DEFAULT_BUFFSIZE = 4 << 20  # the Simple buffer, DEFAULT_BUFFSIZE, init.cc:813 (2.18-2.30)
# (NCCL_BUFFSIZE, NCCL_NVLS_CHUNKSIZE, NCCL_NVLSTREE_MAX_CHUNKSIZE) as the job sets them; None:
# unset (4 MiB, 128 KiB, NCCL's own cap: init.cc:813, nvls.cc:160-161)
Chunking = tuple[Optional[int], Optional[int], Optional[int]]
DEFAULT_CHUNKING: Chunking = (None, None, None)
NCCL_STEPS = 8  # src/include/device.h:26
_SHRINK = {"NVLS": ((64, 65536), (8, 32768), (2, 16384)),
           "NVLSTree": ((32, 262144), (16, 131072), (4, 65536), (1, 32768))}


@lru_cache(maxsize=256)  # a plan asks at every size; pure
def nvls_channels(compcap: int, nodes: int, version: str = "2.30.7") -> int:
    """``comm->nvlsChannels`` of NCCL ``version`` (:func:`.channels.nvls_channels`)."""
    v = parse_version(version) or (2, 30, 7)
    return of_release(compcap, nodes, (v[0], v[1]))


def first_chunk(algo: str, nodes: int, version: str = "2.30.7",
                chunking: Chunking = DEFAULT_CHUNKING) -> int:
    """The chunk NCCL ``version`` starts an NVLS or NVLSTree collective from, before shrinking
    it, under the job's ``chunking`` (see the module).

    >>> first_chunk("NVLSTree", 2, "2.30.7"), first_chunk("NVLSTree", 4, "2.30.7")
    (131072, 65536)
    >>> first_chunk("NVLSTree", 2, "2.19.3"), first_chunk("NVLSTree", 4, "2.18.3")
    (524288, 524288)
    >>> p5 = (8 << 20, 512 << 10, 512 << 10)  # aws-ofi-nccl on p5
    >>> first_chunk("NVLSTree", 4, "2.22.3", p5), first_chunk("NVLS", 1, "2.22.3", p5)
    (524288, 524288)
    >>> first_chunk("NVLS", 1, "2.20.5", p5), first_chunk("NVLSTree", 2, "2.19.3", p5)
    (131072, 1048576)
    >>> small = (512 << 10, None, None)  # NCCL_BUFFSIZE=524288: a 64 KiB step
    >>> first_chunk("NVLS", 1, "2.30.7", small), first_chunk("NVLSTree", 2, "2.30.7", small)
    (65536, 131072)
    """
    buffsize, nvls_env, tree_env = chunking
    v = (parse_version(version) or (2, 30, 7))[:2]
    # the Simple step, buffSizes[NCCL_PROTO_SIMPLE] / NCCL_STEPS (enqueue.cc:2222, 2225); -2
    # is NCCL's unset (init.cc:827)
    step = (buffsize if buffsize not in (None, -2) else DEFAULT_BUFFSIZE) // NCCL_STEPS
    nvls = nvls_env if nvls_env is not None and v >= (2, 21) else NVLS_CHUNK
    if algo == "NVLS":
        return min(step, nvls)
    if v < (2, 20):
        return 65536 if v >= (2, 19) and nodes >= 4 else step
    start = step if v < (2, 21) else nvls
    cap = tree_env if tree_env is not None and tree_env != -2 else \
        (65536 if nodes >= 4 else start)
    return min(start, cap)


def chunk_bytes(algo: str, nbytes: int, concurrent: int, nodes: int, version: str = "2.30.7",
                chunking: Chunking = DEFAULT_CHUNKING) -> int:
    """The chunk NCCL cuts an NVLS or NVLSTree collective of ``nbytes`` into, ``concurrent``
    being channels × heads (enqueue.cc:2262-2288)."""
    chunk = first_chunk(algo, nodes, version, chunking)
    for loops, size in _SHRINK[algo]:
        if nbytes < loops * concurrent * chunk and chunk > size:
            chunk = size
    return chunk


def loop_bytes(algo: str, nbytes: int, channels: int, nodes: int, heads: int,
               version: str = "2.30.7", chunking: Chunking = DEFAULT_CHUNKING) -> int:
    """Bytes all ``channels`` move in one pass of the NVLS loop (``nHeads`` chunks each)."""
    concurrent = max(channels * heads, 1)
    return chunk_bytes(algo, nbytes, concurrent, nodes, version, chunking) * concurrent


@lru_cache(maxsize=256)
def fill_scale(algo: str, graph: Optional[AlgoGraph], nodes: int, compcap: int,
               version: str = "2.30.7") -> float:
    """NCCL's NVLSTree bandwidth of ``graph`` on ``nodes`` over the one it gives the same graph
    on two nodes, at most 1: the rate of the fill's stages in units of NCCL's bandwidth; 1 but
    for NVLSTree on more than two nodes (see the module)."""
    if algo != "NVLSTree" or nodes <= 2 or graph is None:
        return 1.0
    if (parse_version(version) or (2, 30, 7)) < (2, 19, 0):  # no tree-load halving to undo:
        return 1.0  # 2.18 prices NVLSTree at bwIntra on 2 nodes, bwInter beyond (tuning.cc:174)
    k = constants_for(version)
    cc = 3 if compcap >= 100 else 2 if compcap >= 90 else 1 if compcap >= 80 else 0
    # ppn is read for NVLS gathers only; NVLSTree is all-reduce (tuning.cc:288-300)
    steady = nvls_bw(k, graph, ALGOS.index("NVLSTree"), True, 1.0, nodes, cc, k.nvls_tree[cc][2])
    fill = nvls_bw(k, graph, ALGOS.index("NVLSTree"), True, 1.0, 2, cc, k.nvls_tree[cc][1])
    return min(1.0, steady / fill) if fill > 0 and steady > 0 else 1.0  # never slower


def fill_bytes(algo: str, nbytes: int, compcap: int, nodes: int, heads: int,
               version: str = "2.30.7", graph: Optional[AlgoGraph] = None,
               chunking: Chunking = DEFAULT_CHUNKING) -> int:
    """``stages × min(nbytes, loop)``, × :func:`fill_scale` of the NVLS ``graph`` where one
    is given: the bytes' worth of NCCL's bandwidth the pipeline's fill takes (see the module)
    under NCCL ``version`` and the job's ``chunking``; 0 for a ring or a tree."""
    if algo not in _SHRINK or nbytes <= 0:
        return 0
    stages = 2 + 2 * (max(nodes, 1) - 1).bit_length() if algo == "NVLSTree" else 2
    loop = loop_bytes(algo, nbytes, nvls_channels(compcap, nodes, version), nodes,
                      max(heads, 1), version, chunking)
    return round(stages * min(nbytes, loop) * fill_scale(algo, graph, nodes, compcap, version))
