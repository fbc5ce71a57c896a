"""The network transports NCCL runs between nodes (``--net``), what each tells NCCL, and how
each is grouped for the time model.

NCCL's choice depends on a transport in two ways, both read from the sources (NVIDIA/nccl
v2.30.7-1 and aws/aws-ofi-nccl at 2daf7d3 unless a tag is named):

- **the latency it reports**: a network plugin's ``props->latency`` becomes the NET node's
  latency (src/graph/topo.cc:1644, 420), the graph's ``latencyInter`` (src/graph/search.cc:745)
  and is added to every network hop of NCCL's latency, twice for Simple (the flush,
  src/graph/tuning.cc:389-391). NCCL's own IB and socket transports report 0
  (src/transport/net_ib/init.cc:558, net_socket.cc:174); aws-ofi-nccl reports 75 µs on EFA
  (src/platform-aws.cpp:83-139: p4d, p4de, p5, p5e; 75 is also its default for an AWS platform
  it does not list, :771-785), 35 µs on p5en and p6 (:150-211), and 0 on other libfabric
  providers (``OFI_NCCL_NET_LATENCY`` default, include/nccl_ofi_param.h:218-221). Google's
  GPUDirect-TCPX plugin reports 0 (google/nccl-plugin-gpudirecttcpx at 4b8ea7f,
  src/net_tcpx.cc:737), its TCPXO plugin 0 too (google/nccl-plugin-gpudirect-tcpxo v1.0.17,
  tcpdirect_plugin/fastrak_offload/nccl_shim.cc:966).
- **the NICs it shows NCCL** (:func:`nccl_nics`): NCCL (2.20 and later) merges the ports of
  one multi-port NIC into one device of their summed speed (``NCCL_IB_MERGE_NICS``, default 1:
  v2.21.5-1 src/transport/net_ib.cc:313, 481-500; same PCI device with the function digit
  dropped and the same ``sys_image_guid``: net_ib.cc:322-325, 371-377, 453), and aws-ofi-nccl's
  RDMA protocol (p5 and later, platform-aws.cpp:139, 156) presents the EFA NICs of one GPU as one
  device of their summed speed (src/nccl_ofi_rdma.cpp:410-413).

The transport does not change the tuning table otherwise; it does change how long NCCL's choice
takes: each transport has its own floor, latency factor and efficiency in the time model
(:mod:`.timing`), fitted where a training table measured it. A transport no table measured
takes its family's constants, else those of all networks, and its error band says so. A family
groups transports whose bytes move the same way:

- ``verbs``: ``ib`` (InfiniBand) and ``roce`` (RoCE v2 Ethernet), NCCL's built-in verbs
  transport: the NIC's RDMA engine moves the bytes, GPUDirect RDMA
  (src/transport/net_ib/*.cc; one QP per connection by default,
  ``NCCL_IB_QPS_PER_CONNECTION``, net_ib/connect.cc:60; GPUDirect flush reads, connect.cc:1354).
- ``libfabric``: ``efa`` (AWS Elastic Fabric Adapter) and ``ofi`` (another libfabric provider,
  HPE Slingshot ``cxi``), both through the aws-ofi-nccl plugin onto the NIC's own protocol.
- ``tcpx``, ``tcpxo``, ``socket``, each alone: Google Cloud's GPUDirect-TCPX (A3 High: the host's
  TCP stack receiving into GPU memory), GPUDirect-TCPXO (A3 Mega: TCP offloaded from the host),
  and NCCL's socket transport (host-memory staging, helper threads and sockets per connection,
  src/transport/net_socket.cc:192-199, 348-390) move bytes three different ways, and their
  tables disagree (TCPX reaches half the bandwidth NCCL's model gives it, TCPXO all of it).

One transport's bandwidth grows with the channels NCCL runs (:func:`channel_scale`): on TCPX
every NCCL connection, one a channel and peer, has sockets and helper threads of its own
(google/nccl-plugin-gpudirecttcpx at 4b8ea7f: ``nThreads x nSocksPerThread`` data sockets and a
control socket a connection, src/connect.cc:165-219, 528-534, 621-662; ``nThreads`` helper
threads a connection, each moving its sockets' bytes through the host's TCP stack,
src/net_tcpx.cc:252-330; Google's settings give each connection one thread and 4 sockets,
``NCCL_SOCKET_NTHREADS=1 NCCL_NSOCKS_PERTHREAD=4``), so a connection moves bytes at the rate
of its thread and flows, not of the NIC, and a node's rate is that times the channels crossing
the network: the time model charges TCPX's bandwidth term per channel that runs, relative to
NCCL's default count (its bandwidth, ``graph channels x per-channel speed``, v2.18.5-1
src/graph/tuning.cc:175, is what the default ``2 x graph channels`` share: connect.cc's
doubling, :attr:`.tuning.Comm.channels`), and never faster than NCCL's bandwidth (the NICs'
line rate as NCCL's graph prices it). ``NCCL_MIN/MAX_NCHANNELS`` (:mod:`.forced`) move it, and
so does NCCL 2.22+ with no setting: TCPX unpacks on the GPU (:data:`UNPACK`), so NCCL doubles
the channels under 16 (:mod:`.channels`) and a ring or tree is timed up to twice as fast,
capped at NCCL's bandwidth: the mechanism extrapolated, no table runs TCPX on 16 channels.
"""

from __future__ import annotations

from typing import Optional

from .versions import parse_version

__all__ = ["NETS", "FAMILY", "family", "NET_HELP", "DEFAULT_NET", "plugin_latency",
           "nccl_nics", "PER_CHANNEL", "channel_scale", "efa_class", "EFA_CLASSES", "time_class"]

NETS = ("ib", "roce", "efa", "ofi", "tcpx", "tcpxo", "socket")
# plugins whose receive is unpacked by NCCL's kernels on the GPU (NCCL_NET_DEVICE_UNPACK, which
# doubles the communicator's channels under 16, channels.py): GPUDirect-TCPX's properties say
# so (google/nccl-plugin-gpudirecttcpx src/net_tcpx.cc:739, ``netDeviceType = DEV_UNPACK``);
# TCPXO's do not (google/nccl-plugin-gpudirect-tcpxo v1.0.17,
# tcpdirect_plugin/fastrak_offload/nccl_shim.cc:968, ``NCCL_NET_DEVICE_HOST``)
UNPACK = ("tcpx",)
# the time model's classes on EFA: aws-ofi-nccl's two protocols (efa_class)
EFA_CLASSES = {"SENDRECV": "efa-sendrecv", "RDMA": "efa-rdma"}
FAMILY = {"ib": "verbs", "roce": "verbs", "efa": "libfabric", "ofi": "libfabric",
          "efa-sendrecv": "libfabric", "efa-rdma": "libfabric",
          "tcpx": "tcpx", "tcpxo": "tcpxo", "socket": "socket"}
NET_HELP = ("Network transport between nodes: ib (InfiniBand verbs), roce (verbs over RoCE), "
            "efa (AWS EFA, aws-ofi-nccl), ofi (other libfabric, e.g. Slingshot), tcpx / tcpxo "
            "(GCP GPUDirect-TCPX/-TCPXO), socket. It sets the latency the network reports to "
            "NCCL and the time model's constants (default: --platform's, else ib).")
DEFAULT_NET = "ib"
# µs a transport reports to NCCL (props->latency): aws-ofi-nccl's on EFA, 0 elsewhere
PLUGIN_LATENCY_US = {"efa": 75.0}
# transports whose connections, one a channel, each move bytes at a rate of their own
PER_CHANNEL = ("tcpx",)


def family(net: str) -> str:
    """The family of ``net``: ``verbs``, ``libfabric``, else the transport itself.

    >>> family("roce"), family("efa"), family("tcpxo")
    ('verbs', 'libfabric', 'tcpxo')
    """
    return FAMILY[net]


def efa_class(protocol: Optional[str], nics: int, gpus_per_node: int) -> str:
    """The time model's class of a topology on EFA: the protocol aws-ofi-nccl runs. The plugin
    takes ``OFI_NCCL_PROTOCOL`` where the user sets it (:mod:`.ofi_env`), else its platform
    table's for the instance type (v1.16.3 src/nccl_ofi_net.cpp:183-225; ``default_protocol``
    of src/platform-aws.cpp:75-205, the same in v1.9.2-aws and v1.13.2-aws
    src/platform-aws.c): SENDRECV on p4d and p4de, RDMA on p5, p5e, p5en and p6 (``protocol``,
    a platform's). A topology given by its hardware names no instance type, so it is read as
    the listed one it matches: at least one NIC a GPU (p5, p5e, p5en, p6: RDMA), else fewer
    (p4d, p4de: SENDRECV).

    The two move bytes differently (SENDRECV: libfabric's tagged send and receive, the
    provider's own eager and rendezvous; RDMA: the plugin's own RDMA writes, striped over a
    GPU's rails, src/nccl_ofi_rdma.cpp), and their tables disagree below 1 MiB on one pick
    (2 x 8, Tree/LL, 75 us reported to NCCL both): p4d's SENDRECV 177-181 us, p5's RDMA 63-86 us.

    >>> efa_class("SENDRECV", 32, 8), efa_class(None, 32, 8), efa_class(None, 8, 8)
    ('efa-sendrecv', 'efa-rdma', 'efa-rdma')
    >>> efa_class(None, 4, 8)
    'efa-sendrecv'
    """
    rdma = gpus_per_node >= 1 and nics >= gpus_per_node
    return EFA_CLASSES[protocol or ("RDMA" if rdma else "SENDRECV")]


def time_class(net: Optional[str], model_name: str, nics: int, gpus_per_node: int,
               protocol: Optional[str] = None) -> Optional[str]:
    """The class of fitted constants that times a topology on transport ``net`` (``None``:
    one node): the transport, and on EFA the protocol aws-ofi-nccl runs (:func:`efa_class`),
    the platform's where the model is one (``nccl:PLATFORM``), ``protocol`` where the job
    sets ``OFI_NCCL_PROTOCOL`` (:mod:`.ofi_env`).

    >>> time_class("efa", "nccl:aws-p4d", 4, 8), time_class("efa", "nccl", 32, 8)
    ('efa-sendrecv', 'efa-rdma')
    >>> time_class("ib", "nccl:aws-p4d", 4, 8), time_class(None, "nccl", 0, 8)
    ('ib', None)
    """
    if net != "efa":
        return net
    from .platforms import PLATFORMS

    p = PLATFORMS.get(model_name.removeprefix("nccl:"))
    return efa_class(protocol or (p.protocol if p else None), nics, gpus_per_node)


def plugin_latency(net: Optional[str]) -> float:
    """µs the transport reports to NCCL as its network latency (see the module).

    >>> plugin_latency("efa"), plugin_latency("ib"), plugin_latency(None)
    (75.0, 0.0, 0.0)
    """
    return PLUGIN_LATENCY_US.get(net or "", 0.0)


def nccl_nics(nics: int, gpus_per_node: int, net: Optional[str], version: str,
              protocol: Optional[str] = None) -> tuple[int, str]:
    """``(devices, why)``: how many network devices NCCL sees for ``nics`` NICs (ports) a
    node, and why where that differs (see the module): more NICs than GPUs a node are, on
    verbs from NCCL 2.20, ports of multi-port NICs NCCL merges, and on EFA the rails
    aws-ofi-nccl's RDMA protocol groups per GPU (not under ``protocol`` SENDRECV, which
    offers each NIC, :mod:`.ofi_env`); the node's bandwidth stays the same.

    >>> nccl_nics(16, 8, "roce", "2.21.5")[0], nccl_nics(16, 8, "roce", "2.19.3")[0]
    (8, 16)
    >>> nccl_nics(32, 8, "efa", "2.30.7")[0], nccl_nics(4, 8, "efa", "2.23.4")[0]
    (8, 4)
    >>> nccl_nics(32, 8, "efa", "2.30.7", "SENDRECV")[0]
    32
    """
    if nics <= gpus_per_node or nics % gpus_per_node or gpus_per_node < 1:
        return nics, ""
    per = nics // gpus_per_node
    if net == "efa" and protocol != "SENDRECV":
        return gpus_per_node, (f"aws-ofi-nccl groups the {per} EFA NICs of a GPU into one "
                               "device (nccl_ofi_rdma.cpp:410-413)")
    if net in ("ib", "roce") and (parse_version(version) or (99, 0, 0)) >= (2, 20, 0):
        return gpus_per_node, (f"{nics} NICs on {gpus_per_node} GPUs taken as {per}-port NICs, "
                               "whose ports NCCL 2.20+ merges (NCCL_IB_MERGE_NICS)")
    return nics, ""


def channel_scale(net: Optional[str], algo: str, channels: int, default: int,
                  floor: float = 0.0) -> float:
    """The factor on NCCL's bandwidth term where ``net`` moves bytes per channel (see the
    module): ``default / channels`` for a ring or a tree on :data:`PER_CHANNEL`, at least
    ``floor`` (the prediction's cap: never faster than NCCL's bandwidth); 1 elsewhere.

    >>> channel_scale("tcpx", "Ring", 12, 8), channel_scale("tcpx", "Ring", 8, 8)
    (0.6666666666666666, 1.0)
    >>> channel_scale("tcpx", "Ring", 32, 8, 0.6), channel_scale("ib", "Ring", 12, 8)
    (0.6, 1.0)
    """
    if net not in PER_CHANNEL or algo not in ("Ring", "Tree") or channels < 1 or default < 1:
        return 1.0
    return max(default / channels, floor)
