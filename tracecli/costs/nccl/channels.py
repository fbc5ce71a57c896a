"""The communicator's channel count, ``comm->nChannels``: what NCCL makes of the ring graph's
channels after its search (src/graph/connect.cc ``ncclTopoPostset``), release by release.

In this order (v2.30.7-1 connect.cc:459-505 unless a tag is named):

1. the ring graph's channels doubled (``nChannels * 2``, at most ``MAXCHANNELS``);
2. doubled again on several nodes of sm90 GPUs (sm90+ from 2.25) whose ring graph carries
   more than 45 GB/s a channel inside a node, "to reach peak BW on <8 PPN": while the count is
   under 16 (v2.20.3-1+; before, while twice it fits in ``MAXCHANNELS``, v2.18.5-1:405);
3. doubled again, under 16, for a network plugin that unpacks on the GPU
   (``NCCL_NET_DEVICE_UNPACK``, from v2.22.3-1: GPUDirect-TCPX, transports.UNPACK);
4. ``NCCL_MAX_NCHANNELS`` bounds it, then ``NCCL_MIN_NCHANNELS`` copies channels up to it
   (``ncclMaxNchannels`` / ``ncclMinNchannels``: clamped to 1..32 and 0..32; unset: -2);
5. 2.20 to 2.27 only: raised to ``comm->nvlsChannels`` where NVLS runs
   (``if (comm->nChannels < comm->nvlsChannels)``, v2.20.3-1 connect.cc:473-474, gone from
   v2.28.3-1): 16 on sm90, on sm100 32 from 2.25 (24 on one node from 2.27)
   (``NVLS_NCHANNELS_SM90`` / ``_SM100`` / ``_SM100_NVL``, v2.27.7-1 nvls.cc:147-198).

NCCL's bandwidths keep the graph's own ``nChannels`` (tuning.cc); this count is the ring
plateau test's (tuning.cc) and, from 2.22, the channels a ring or tree collective starts
from (enqueue.cc ``int nc = comm->nChannels``, v2.22.3-1:1617). In 2.20 and 2.21 a ring or
tree starts from ``comm->collChannels``, recorded before the NVLS raise (v2.20.3-1
connect.cc:471, enqueue.cc:1532; v2.21.5-1 enqueue.cc:1568): :func:`model_channels`'s
``collective=True``.

>>> comm_channels(4, 45.0, 90, 2, "2.30.7"), comm_channels(4, 48.0, 90, 2, "2.30.7")
(8, 16)
>>> comm_channels(8, 48.0, 90, 2, "2.30.7"), comm_channels(8, 48.0, 90, 2, "2.19.3")
(16, 32)
>>> comm_channels(4, 20.0, 90, 2, "2.30.7", unpack=True), comm_channels(4, 20.0, 90, 2, "2.21.5", unpack=True)
(16, 8)
>>> comm_channels(4, 20.0, 90, 2, "2.26.2", nvls=True), comm_channels(12, 30.0, 90, 1, "2.26.2", max_channels=4)
(16, 4)
"""

from __future__ import annotations

from typing import Optional

from .forced import channel_bounds
from .transports import UNPACK
from .versions import parse_version

__all__ = ["comm_channels", "model_channels", "nvls_channels", "MAXCHANNELS"]

MAXCHANNELS = 32  # src/include/device.h (MAXCHANNELS), 2.18-2.30


def nvls_channels(compcap: int, nodes: int, release: tuple[int, int]) -> int:
    """``comm->nvlsChannels`` of NCCL ``release`` with no ``NCCL_NVLS_NCHANNELS``."""
    if compcap < 100 or release < (2, 25):
        return 16  # NCCL_NVLS_NCHANNELS default 16 up to 2.24; NVLS_NCHANNELS_SM90 after
    if release >= (2, 27) and nodes == 1:
        return 24  # NVLS_NCHANNELS_SM100_NVL
    return 32


def comm_channels(ring_channels: int, ring_bw_intra: float, compcap: int, nodes: int,
                  version: str, *, unpack: bool = False, nvls: bool = False,
                  min_channels: Optional[int] = None,
                  max_channels: Optional[int] = None) -> int:
    """``comm->nChannels`` for a ring graph of ``ring_channels`` at ``ring_bw_intra`` GB/s."""
    v = parse_version(version) or (2, 30, 7)
    release = (v[0], v[1])
    n = min(MAXCHANNELS, 2 * ring_channels)
    if nodes > 1 and ring_bw_intra > 45.0 and \
            (compcap == 90 or (compcap > 90 and release >= (2, 25))):
        if (n < 16) if release >= (2, 20) else (2 * n <= MAXCHANNELS):
            n *= 2
    if unpack and nodes > 1 and n < 16 and release >= (2, 22):
        n *= 2
    if max_channels is not None:
        n = min(n, max(1, min(MAXCHANNELS, max_channels)))
    if min_channels is not None:
        n = max(n, min(MAXCHANNELS, min_channels))
    if nvls and (2, 20) <= release < (2, 28):
        n = max(n, nvls_channels(compcap, nodes, release))
    return n


def model_channels(model, collective: bool = False) -> int:
    """``comm->nChannels`` of an :class:`~.model.NcclModel`: its ring graph's, under its job's
    ``NCCL_MIN/MAX_NCHANNELS``; ``collective``: the count a ring or tree collective starts
    from (``collChannels`` before 2.22: no NVLS raise). Cached on the model: a plan asks for
    thousands of sizes."""
    key = ("comm_channels", collective, model.ring, model.nvls is None, model.nccl_env,
           model.version, model.topology, model.net, model.compcap)  # what it is made of
    hit = model._cache.get(key)
    if hit is None:
        hit = model._cache[key] = _model_channels(model, collective)
    return hit


def _model_channels(model, collective: bool) -> int:
    low, high = channel_bounds(dict(model.nccl_env))
    v = parse_version(model.version) or (2, 30, 7)
    raise_ = model.nvls is not None and not (collective and (v[0], v[1]) < (2, 22))
    return comm_channels(model.ring.n_channels, model.ring.bw_intra, model.compcap,
                         model.topology.nodes, model.version, unpack=model.link_net in UNPACK,
                         nvls=raise_, min_channels=low, max_channels=high)
