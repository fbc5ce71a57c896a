"""How long the (algorithm, protocol) NCCL picks takes: a time model on top of NCCL's choice.

NCCL's own model (:mod:`.tuning`) ranks the pairs; its ``latency + bytes / bandwidth`` is
not a stopwatch (tuning.cc:620-621 calls its tree numbers "not perfectly sticking to the
model"). tracecli keeps NCCL's CHOICE exactly and times that choice as it runs
(NVIDIA/nccl v2.30.7-1 unless a tag is named):

- **the floor**: a kernel launch and its completion, which nccl-tests' per-iteration time
  includes and NCCL's model leaves out, and on several nodes the proxy thread's network round
  trip (src/proxy.cc; the network plugin's ``isend``/``irecv``/``test``, src/transport/net.cc).
  Not in NCCL's source: FITTED (``floor``, ``net_floor``).
- **the steps**: NCCL's latency term, its per-hop latencies summed over the algorithm's steps
  (``2(nRanks-1)`` ring steps, ``log2(nNodes)`` tree levels, tuning.cc:384-435), scaled by a
  FITTED factor per link class (``lat``): NCCL's hop latencies are ranking constants.
- **the pipeline**: each step moves one chunk per channel; the buffers are ``NCCL_STEPS`` = 8
  slots (src/include/device.h:26) of ``buffSize / NCCL_STEPS``: Simple 4 MiB / 8 = 512 KiB
  (``DEFAULT_BUFFSIZE``, src/init.cc:813), LL ``8 lines x 512 threads x 8 steps x 16 B`` /
  8 = 64 KiB of which half is data (4-byte flag per 4-byte word, ``ncclLLFifoLine``,
  device.h:75-88, enqueue.cc:2224), LL128 ``120 x 640 x 8 x 8 B`` / 8 = 600 KiB of which 15
  of 16 words are data (device.h:110-115, enqueue.cc:2225); ring all-reduce chunks are
  ``ALLREDUCE_CHUNKSTEPS`` = 4 steps, sliced in ``ALLREDUCE_SLICESTEPS`` = 2
  (src/include/collectives.h:19-20; src/device/prims_simple.h:183). A ring's or a tree's
  fill is what NCCL's latency term already charges per step (NVLS's is not: the fill
  below); what the model adds is how many channels carry a SMALL collective:
  ``enqueue.cc:2070-2096`` drops channels while ``nBytes < nChannels x nThreads x threshold``
  (thresholds 8 B a thread for LL, x nRanks on a ring, 8 for LL128, 64 for Simple:
  src/include/comm.h:49-51, tuning.cc:587-595; threads 512 LL and Simple, 640 LL128,
  tuning.cc:244-257), so a small collective runs on fewer channels than NCCL's bandwidth
  assumes (:func:`channels_used`). Not all of that shows: the channels left run faster than
  their share of the links (NCCL's per-channel bandwidth is the links' split over ALL
  channels, tuning.cc:306-323, while a channel is one SM's copy loop), so how much of the
  reduction costs is FITTED (``chan``, one for all classes: the factor on the part of the
  bandwidth term the reduction adds; 0 where all of it shows, ``-bw`` where none does, as
  in NCCL's own model, which prices every channel).
- **the fill** (:mod:`.pipeline`): NVLS and NVLSTree run each chunk through stages (scatter,
  reduce and multicast, the network tree, gather) whose first loop fills the pipeline; NCCL
  shrinks the chunk at mid sizes (enqueue.cc:2262-2288), so a collective of a few MiB pays
  ``stages x min(bytes, loop)`` more at NCCL's bandwidth; the fraction of it that shows is
  FITTED (``fill``, one for all classes).
- **the ring on a network**: NCCL's bandwidth carries per-(algorithm, protocol) factors of its
  own (ring LL 1/2, ring LL128 0.92, tree 0.92, tree LL 1/3.8, tree LL128 120/128, a tree graph
  of pattern TREE 0.85: tuning.cc:326-333), ranking constants like its latencies. Its
  algorithms also cross the network differently: on two nodes it prices every algorithm at
  the graph's intra-node speed (``bw = nNodes <= 2 ? bwIntra : bwInter``, tuning.cc:306) and
  NVLSTree at twice the inter-node one (tuning.cc:318), where a ring's graph has the two equal
  and a tree's often does not. How much faster a ring runs on a network than the other
  algorithms' common factor says is FITTED (``ring_net``, one for all networks, pulled toward
  0).
- **the LL protocol on a network**: LL moves 8-byte lines of 4 data bytes and 4 flag bytes,
  which on a network the proxy posts through the transport a step at a time (LL's step is
  ``buffSize / NCCL_STEPS``: 64 KiB a slot, half of it data, against Simple's 512 KiB),
  while NCCL prices it at half the graph's bandwidth like any other link (``ncclLLFifoLine``,
  device.h:75-88; tuning.cc:330-352). How much slower (or faster) LL runs on a network than
  that is FITTED (``ll_net``, added to ``bw`` where the pick is LL on several nodes, per link
  class as ``bw``, pulled toward 0): the three Slingshot clusters run Ring/LL from 64 KiB to
  1 MiB at 2-3.6x NCCL's time, while their 8-32 B rows are at NCCL's latency.
- **the channels on TCPX**: GPUDirect-TCPX moves each channel's bytes through sockets and a
  helper thread of its own, so its bandwidth is the channels that run x a rate a channel, not
  NCCL's bandwidth: the bandwidth terms are scaled by twice the ring graph's channels (the
  count the fitted tables ran) over those a ring or tree starts from (``per_channel``,
  :func:`.transports.channel_scale`; moved by ``NCCL_MIN/MAX_NCHANNELS`` and, from NCCL 2.22,
  by the unpack doubling, :mod:`.channels`), never below NCCL's own bandwidth.
- **the bandwidth**: NCCL's algorithm bandwidth for the pair (the graph's per-channel speed x
  channels, per protocol: LL 1/2, LL128 0.92, tuning.cc:330-352), divided by a FITTED
  efficiency per link class (``bw``): what NVLink, NVLS, and each network transport
  (:mod:`.transports`) actually deliver of it.

So ``time = floor [+ net_floor] + lat · NCCL latency + bw · bytes / (NCCL bandwidth · channels
used / channels) + chan · (that term's part from the channels dropped) + fill · fill bytes /
NCCL bandwidth [+ ring_net · the bandwidth term, a ring on several nodes] [+ ll_net · the
bandwidth term, LL on several nodes]``, ``lat`` being
``lat_nvls`` where the pick is NVLS or NVLSTree (NCCL's NVLS
latencies price a multicast, not hops: :func:`features`) and the NVLS bandwidth on sm100 its
own factor; a training table run by one thread driving several GPUs adds :func:`launch_us`.
Linear in the fitted constants (:mod:`.fit_time` fits them by least
squares on the training tables of :mod:`.training`). The link class is ``local`` on one node,
else the network transport; a transport no training table measured takes its family's
constants, else those of all networks (:func:`.fit_time.resolve`).

>>> channels_used("Ring", "LL", 8 * 1024, 16, 8), channels_used("Ring", "Simple", 1 << 30, 16, 8)
(1, 16)
"""

from __future__ import annotations

from dataclasses import dataclass
__all__ = ["TimeParams", "channels_used", "features", "time_us", "launch_us", "NCCL_STEPS",
           "THREADS", "THRESHOLD"]

NCCL_STEPS = 8  # src/include/device.h:26
# comm->maxThreads (tuning.cc:244-257): Simple 512 (256 when the ring carries no more than
# PCI_BW = 12 GB/s), LL 512 (NCCL_LL_MAX_NTHREADS), LL128 640 (NCCL_LL128_MAX_NTHREADS)
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}  # bytes a thread, comm.h:49-51


def channels_used(algo: str, proto: str, nbytes: int, channels: int, ranks: int,
                  ring_gbps: float = 1e9) -> int:
    """How many of ``channels`` NCCL runs a ring or tree collective of ``nbytes`` on
    (enqueue.cc:2090-2096); NVLS and others keep their channels."""
    if algo not in ("Ring", "Tree") or channels < 1:
        return max(channels, 1)
    threads = THREADS[proto]
    if proto == "Simple" and ring_gbps <= 12.0:
        threads = 256
    threshold = THRESHOLD[proto] * (ranks if (algo, proto) == ("Ring", "LL") else 1)
    nc = channels
    while nbytes < nc * threads * threshold and nc >= 2:
        nc -= 1
    return nc


@dataclass(frozen=True)
class TimeParams:
    """The fitted constants of one link class: µs of floor (one node), µs more on several
    nodes, the factor on NCCL's latency term and on its bandwidth term, and the factor on
    NCCL's NVLS/NVLSTree bandwidth term on compute capability 10.0+ (one for all classes:
    NCCL's own NVLS efficiency is a per-architecture constant, ``nvlsEfficiency``, v2.30.7-1
    tuning.cc:139-144, 0.85 on sm90 and 0.74 on sm100, which the time model refits)."""

    floor: float
    net_floor: float
    lat: float
    bw: float
    bw_nvls_sm100: float = 1.0
    launch: float = 0.0  # µs per more GPU one thread launches (launch_us); 0 in the product
    lat_nvls: float = 1.0  # the factor on NCCL's latency term where the pick is NVLS/NVLSTree
    fill: float = 0.0  # the factor on the NVLS/NVLSTree pipeline's fill (pipeline.fill_bytes)
    chan: float = 0.0  # the factor on the bandwidth term's part from channels dropped
    ring_net: float = 0.0  # added to bw where the pick is a ring on several nodes
    ll_net: float = 0.0  # added to bw where the pick's protocol is LL on several nodes


def features(lat_us: float, bw_gbps: float, nbytes: int, used: int, channels: int,
             multi_node: bool, nvls_sm100: bool = False, nvls: bool = False, fill: int = 0,
             ring: bool = False, per_channel: float = 1.0, ll: bool = False
             ) -> tuple[float, ...]:
    """``(1, multi-node?, latency µs, bandwidth µs, NVLS-on-sm100 bandwidth µs, NVLS latency
    µs, fill µs, channel-reduction µs, ring-on-a-network µs, LL-on-a-network µs)``: the
    terms each constant
    multiplies. The bandwidth term goes to the fifth where the pick is NVLS or NVLSTree on
    compute capability 10.0+, the latency term to the sixth where the pick is NVLS or NVLSTree
    on any (NCCL's NVLS latencies, tuning.cc's NVLS rows of ``hwLat``/``baseLat``, price a
    multicast through the NVSwitch and, for NVLSTree, a tree over the network, not a ring's
    or a tree's hops); the seventh is the pipeline's fill (``fill`` bytes,
    :func:`.pipeline.fill_bytes`) at NCCL's bandwidth; the eighth what running on ``used`` of
    ``channels`` adds to the bandwidth term; the ninth the bandwidth term again where the pick
    is a ring (``ring``) on several nodes; the tenth the bandwidth term again where the
    pick's protocol is LL (``ll``) on several nodes. ``per_channel`` scales every bandwidth
    term: a
    transport whose connections each move bytes at a rate of their own runs at that rate x
    the channels, not at NCCL's bandwidth (:func:`.transports.channel_scale`)."""
    frac = min(1.0, used / channels) if channels > 0 else 1.0
    per_byte = per_channel / (1000.0 * bw_gbps) if bw_gbps > 0 else 0.0
    bw_us = nbytes * per_byte / frac
    return (1.0, 1.0 if multi_node else 0.0, 0.0 if nvls else lat_us,
            0.0 if nvls_sm100 else bw_us, bw_us if nvls_sm100 else 0.0,
            lat_us if nvls else 0.0, fill * per_byte, bw_us - nbytes * per_byte,
            bw_us if ring and multi_node else 0.0, bw_us if ll and multi_node else 0.0)


def time_us(params: TimeParams, feats: tuple[float, ...]) -> float:
    one, net, lat, bw, bw_nvls, lat_nvls, fill, chan, ring, ll = feats
    return (params.floor * one + params.net_floor * net + params.lat * lat + params.bw * bw
            + params.bw_nvls_sm100 * bw_nvls + params.lat_nvls * lat_nvls + params.fill * fill
            + params.chan * chan + params.ring_net * ring + params.ll_net * ll)


def launch_us(params: TimeParams, gpus_per_thread: int) -> float:
    """µs more when ONE thread drives ``gpus_per_thread`` GPUs (nccl-tests ``-g N``): it
    launches their kernels one after another inside one ``ncclGroupStart``/``ncclGroupEnd``
    (nccl-tests src/common.cu:540-619 at a0b82b2, ``startColl``; NCCL's ``ncclGroupEnd``
    sets each GPU's device and launches each communicator's kernel in turn, v2.30.7-1
    src/group.cc:309-369 ``doLaunches``), where one process per GPU (torchrun,
    ``mpirun -np``) launches them in parallel. A training table's harness, not the cluster:
    the product times one process per GPU, as DDP and FSDP run, and never adds it."""
    return params.launch * max(0, gpus_per_thread - 1)
