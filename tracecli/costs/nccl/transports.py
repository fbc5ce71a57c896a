"""The network transports NCCL runs between nodes (``--net``), and how each is grouped.

NCCL picks its algorithm and protocol from the topology alone; the transport changes none of
that (tuning.cc reads only a plugin's reported latency, which tracecli takes as 0 as NCCL
does when a plugin reports none). It changes how long the choice takes: each transport has
its own floor, latency factor and efficiency in the time model (:mod:`.timing`), fitted
where a training table measured it. A transport no table measured takes its family's
constants, else those of all networks, and its error band says so.

- ``ib``: InfiniBand verbs with GPUDirect RDMA, NCCL's built-in IB transport
  (src/transport/net_ib/*.cc; one QP per connection by default, ``NCCL_IB_QPS_PER_CONNECTION``,
  net_ib/connect.cc:60; GPUDirect flush reads, connect.cc:1354).
- ``roce``: the same verbs transport over RoCE v2 Ethernet (``NCCL_IB_GID_INDEX``).
- ``efa``: AWS Elastic Fabric Adapter through the aws-ofi-nccl plugin (libfabric ``efa``).
- ``ofi``: another libfabric provider through aws-ofi-nccl (HPE Slingshot ``cxi``).
- ``tcpx``, ``tcpxo``: Google Cloud's GPUDirect-TCPX (A3 High) and GPUDirect-TCPXO (A3 Mega)
  plugins: TCP with payloads DMA'd to and from GPU memory.
- ``socket``: NCCL's built-in socket transport (src/transport/net_socket.cc: host-memory
  staging, helper threads and sockets per connection, net_socket.cc:192-199, 348-390).
"""

from __future__ import annotations

__all__ = ["NETS", "FAMILY", "family", "NET_HELP", "DEFAULT_NET"]

NETS = ("ib", "roce", "efa", "ofi", "tcpx", "tcpxo", "socket")
# rdma: verbs with GPUDirect RDMA; plugin: a network plugin's own transport; socket: host TCP
FAMILY = {"ib": "rdma", "roce": "rdma", "efa": "plugin", "ofi": "plugin", "tcpx": "plugin",
          "tcpxo": "plugin", "socket": "socket"}
NET_HELP = ("Network transport between nodes: ib (InfiniBand verbs), roce (verbs over RoCE), "
            "efa (AWS EFA, aws-ofi-nccl), ofi (other libfabric, e.g. Slingshot), tcpx / tcpxo "
            "(GCP GPUDirect-TCPX/-TCPXO), socket. It changes the time model, not NCCL's choice "
            "(default: --platform's, else ib).")
DEFAULT_NET = "ib"


def family(net: str) -> str:
    """``rdma``, ``plugin`` or ``socket``.

    >>> family("roce"), family("tcpxo")
    ('rdma', 'plugin')
    """
    return FAMILY[net]
