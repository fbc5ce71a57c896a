"""The line rate: no collective across nodes takes less time than its bytes need to cross
one node's network links.

The time model (:mod:`.timing`) scales NCCL's bandwidth by constants fitted per transport;
a transport fitted on a run whose bytes outpace the link speed NCCL reads (the socket table:
two ranks of ONE machine, whose socket traffic the kernel keeps inside it, priced by NCCL at
1.2 GB/s a channel, the 10 Gb/s it reads from ``/sys/class/net/IF/speed`` or assumes where
it reads none, v2.29.7-1 src/transport/net_socket.cc:90-108) learns a factor that would send
bytes over a real NIC faster than it can carry them. So a prediction on several nodes
whose NICs are known is never below the time the bytes every algorithm must move through
one node's NICs take at their summed line rate (``nic_gbps``, in one direction: the links
are full duplex):

- **all-reduce** of ``S`` bytes: ``S``. A node's ranks hold a partial sum of every byte that
  the other nodes need and need theirs: at least ``S`` leaves the node (a ring sends
  ``2(N-1)/N · S``; a switch that reduces in the network, SHARP, takes ``S`` and returns it).
- **broadcast** of ``S``: ``S`` enters every node but the root's.
- **all-gather** of ``T`` bytes gathered, **reduce-scatter** of ``T`` bytes in: the ``(N-1)/N``
  of ``T`` that other nodes hold enters (all-gather) or leaves (reduce-scatter) each node.

A bound every algorithm obeys, weaker than what any of them moves, so it holds whatever
NCCL picks; no training table's held-out prediction comes near it (tests/costs/test_wire.py).

>>> round(line_rate_us("AllReduce", 1 << 30, 2, 25.0))   # 1 GiB over 25 Gb/s: 344 ms
343597
>>> line_rate_us("AllGather", 1 << 30, 1, 3200.0), line_rate_us("AllReduce", 1 << 30, 2, None)
(0.0, 0.0)
"""

from __future__ import annotations

from typing import Optional

__all__ = ["line_rate_us", "BYTES_PER_US_PER_GBPS"]

BYTES_PER_US_PER_GBPS = 125.0  # 1 Gb/s = 125e6 B/s = 125 B/µs


def line_rate_us(func: str, charged: float, nodes: int, nic_gbps: Optional[float]) -> float:
    """µs the bytes of NCCL collective ``func`` (``AllReduce``, ``Broadcast``, ``AllGather``,
    ``ReduceScatter``; ``charged`` bytes as NCCL charges them: the whole buffer, gathered for
    all-gather) must spend on one node's links at ``nic_gbps``; 0 on one node, where the NICs
    are not known, or for a function it has no rule for."""
    if nodes < 2 or not nic_gbps or nic_gbps <= 0 or charged <= 0:
        return 0.0
    if func in ("AllReduce", "Broadcast"):
        wire = charged
    elif func in ("AllGather", "ReduceScatter"):
        wire = charged * (nodes - 1) / nodes
    else:
        return 0.0
    return wire / (nic_gbps * BYTES_PER_US_PER_GBPS)
