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
- **the chunk** (``calcCollChunking``, src/enqueue.cc:2262-2288): ``nvlsChunkSize`` 128 KiB
  (``NCCL_NVLS_CHUNKSIZE``, src/transport/nvls.cc:160; NVLSTree at most 64 KiB from 4 nodes,
  nvls.cc:225-227), SHRUNK at mid sizes so every channel gets several: NVLS to 64/32/16 KiB
  below 64/8/2 loops of ``nChannels × nHeads × chunk``, NVLSTree to 256/128/64/32 KiB below
  32/16/4/1 of them.
- **the loop**: one pass of the device's loop moves ``nHeads`` chunks a channel
  (``loopCount = nvls->nHeads * chunkSize``, all_reduce.h:414) on ``comm->nvlsChannels``
  channels (enqueue.cc:2084-2089): 16 on sm90, on sm100 24 on one node and 32 on several
  (nvls.cc:155-157, 208-214; NCCL 2.28+'s sm100 multi-node tuning may pick 24, nvls.cc:163-201:
  not modelled); ``nHeads`` is the NVLS graph's channel count (src/graph/connect.cc:248-261).

The fill is then ``stages × min(bytes, loop)`` bytes at NCCL's bandwidth: a collective of
several loops pays it once, one smaller than a loop pays it on all its bytes (its chunks are
the loop's). A ring moves all its ranks in lockstep (each step's send needs the previous step's
receive, all_reduce.h:42-80) and a tree's chunk shrinking (enqueue.cc:2289-2297) keeps its
pipeline full: neither is given a fill (docs/nccl-time-model.md: fitted, both came out near 0).

>>> chunk_bytes("NVLS", 16 << 20, 16 * 8, 1)  # 16 MiB on 16 channels x 8 heads: 32 KiB chunks
32768
>>> loop_bytes("NVLSTree", 64 << 20, 16, 2, 8)  # 128 KiB x 16 channels x 8 heads
16777216
>>> fill_bytes("NVLSTree", 1 << 30, 80, 2, 8), fill_bytes("Ring", 1 << 30, 90, 2, 8)
(67108864, 0)
"""

from __future__ import annotations

from .channels import nvls_channels as of_release
from .versions import parse_version

__all__ = ["chunk_bytes", "loop_bytes", "fill_bytes", "nvls_channels", "NVLS_CHUNK"]

NVLS_CHUNK = 128 * 1024  # NCCL_NVLS_CHUNKSIZE default, nvls.cc:160
_SHRINK = {"NVLS": ((64, 65536), (8, 32768), (2, 16384)),
           "NVLSTree": ((32, 262144), (16, 131072), (4, 65536), (1, 32768))}


def nvls_channels(compcap: int, nodes: int, version: str = "2.30.7") -> int:
    """``comm->nvlsChannels`` of NCCL ``version`` (:func:`.channels.nvls_channels`)."""
    v = parse_version(version) or (2, 30, 7)
    return of_release(compcap, nodes, (v[0], v[1]))


def chunk_bytes(algo: str, nbytes: int, concurrent: int, nodes: int) -> int:
    """The chunk NCCL cuts an NVLS or NVLSTree collective of ``nbytes`` into, ``concurrent``
    being channels × heads (enqueue.cc:2262-2288)."""
    chunk = 65536 if algo == "NVLSTree" and nodes >= 4 else NVLS_CHUNK
    for loops, size in _SHRINK[algo]:
        if nbytes < loops * concurrent * chunk and chunk > size:
            chunk = size
    return chunk


def loop_bytes(algo: str, nbytes: int, channels: int, nodes: int, heads: int) -> int:
    """Bytes all ``channels`` move in one pass of the NVLS loop (``nHeads`` chunks each)."""
    concurrent = max(channels * heads, 1)
    return chunk_bytes(algo, nbytes, concurrent, nodes) * concurrent


def fill_bytes(algo: str, nbytes: int, compcap: int, nodes: int, heads: int,
               version: str = "2.30.7") -> int:
    """``stages × min(nbytes, loop)``: the bytes' worth of NCCL's bandwidth the pipeline's
    fill takes (see the module) under NCCL ``version``; 0 for a ring or a tree."""
    if algo not in _SHRINK or nbytes <= 0:
        return 0
    stages = 2 + 2 * (max(nodes, 1) - 1).bit_length() if algo == "NVLSTree" else 2
    loop = loop_bytes(algo, nbytes, nvls_channels(compcap, nodes, version), nodes,
                      max(heads, 1))
    return stages * min(nbytes, loop)
