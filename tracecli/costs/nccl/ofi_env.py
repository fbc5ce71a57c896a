"""What aws-ofi-nccl changes in NCCL's environment on AWS, and its protocol as the job sets it.

Sources: github.com/aws/aws-ofi-nccl tags, github.com/NVIDIA/nccl tags (:mod:`.pipeline` for
what NCCL does with the chunk settings).

- **The platform's environment** (:func:`plugin_env`). aws-ofi-nccl's platform table gives
  each instance type settings it adds to NCCL's environment at plugin init (v1.16.3
  src/platform-aws.cpp:74-205, ``platform_data_map[].env``, inserted at :585): on p4d and p4de
  ``NCCL_BUFFSIZE=8388608`` and ``NCCL_P2P_NET_CHUNKSIZE=524288`` (:76-103); on p5 and p5e
  (:148-163) and on p5en and later (the ``p-series`` entry, :115-135; p5en/p6-b200 and p6-b300
  entries of their own at 2daf7d3, src/platform-aws.cpp:149-200) those and ``NCCL_NVLSTREE_MAX_CHUNKSIZE=524288``,
  ``NCCL_NVLS_CHUNKSIZE=524288`` and ``NCCL_NET_FORCE_FLUSH=0``. The job's own value wins: an
  entry is inserted with ``overwrite`` false and a variable already set is kept
  (include/nccl_ofi_environ.h v1.16.3:40-51, 94-104; before v1.16, ``setenv(..., 0)``,
  v1.10.0-aws src/platform-aws.c:513-524, which first set both chunk settings, commit
  3defe9e2; v1.8.1-aws set the NVLSTree one alone, :439-440; KeitaW's p5 log, aws-ofi-nccl
  1.9.2-aws, prints both). tracecli models the ones its time model reads: ``NCCL_BUFFSIZE``
  (the Simple buffer's step, where NVLS chunks start) and the two chunk settings
  (:func:`.pipeline.first_chunk`). They apply on a ``--platform`` whose network is EFA, at any
  node count (NCCL loads its net plugin at init), and on hardware given by flags over
  ``--net efa`` on several nodes, read as the instance it matches (``transports.efa_class``:
  a NIC a GPU, p5's; fewer, p4d's). The table is aws-ofi-nccl 1.16's, the release whose tuner
  tracecli reads (:mod:`.ofi_tuner`): ``NCCL_BUFFSIZE`` entered it in v1.16.0 (earlier plugins
  leave NCCL's 4 MiB), which moves only NCCL 2.18-2.20's NVLSTree chunk, where it starts from
  the buffer's step, and there only beyond 1 GiB (a collective of 64 MiB-1 GiB runs the same
  chunk, shrunk, under either buffer).
- **``NCCL_BUFFSIZE``** as the job sets it (``--nccl-env``; it wins over the plugin's, as
  above). NCCL reads it with ``strtoll`` (src/misc/param.cc:95 v2.30.7-1) into
  ``comm->buffSizes[NCCL_PROTO_SIMPLE]`` alone: the Simple protocol's buffer, LL and LL128
  having ``NCCL_LL_BUFFSIZE`` and ``NCCL_LL128_BUFFSIZE`` of their own (``computeBuffSizes``,
  v2.30.7-1 src/init.cc:813-827; the same in every release 2.18-2.30, v2.18.3-1
  init.cc:502-522), any value but -2 (its unset) taken as given: no release checks a bound,
  a power of two or a multiple of anything. What it changes, release by release: the Simple
  step ``buffSize / NCCL_STEPS`` every chunk starts from (enqueue.cc:2222-2225; v2.18.3-1
  :1307-1310), so a ring's chunk (``chunkSteps`` of them) and a tree's; NVLS's chunk, the step
  at most 128 KiB up to 2.20 and at most ``nvlsChunkSize`` from 2.21 (v2.18.3-1 :1339-1340,
  v2.21.5-1 :1743-1745, v2.30.7-1 :2263-2267); NVLSTree's chunk up to 2.20 (the step,
  v2.18.3-1 :1310, v2.20.3-1 :1687, 1717; 2.19 from 4 nodes 64 KiB whatever the step,
  v2.19.3-1 :1372), not from 2.21 (``nvlsChunkSize``, v2.21.5-1 :1754-1757, v2.30.7-1
  :2281); the bytes a connection keeps in flight (``NCCL_STEPS`` slots of a step,
  src/device/prims_simple.h:579), the buffers' memory (src/transport/p2p.cc, net.cc, shm.cc;
  NVLS's up to 2.20, v2.20.5-1 src/transport/nvls.cc:309-311) and the P2P chunk's cap
  (init.cc:842-843). NCCL's CHOICE it does not change: no release's src/graph/tuning.cc
  reads the buffers. tracecli's time model has ONE term that a buffer changes, the NVLS and
  NVLSTree pipelines' fill (:func:`.pipeline.first_chunk`); rings and trees are given no
  fill (:mod:`.pipeline`), and the bytes in flight are no term of it (fitted on 4 and 8 MiB
  buffers): their times do not move. NCCL takes any number, but 2.27+ rounds a chunk down
  to the Simple grain of 512 bytes (v2.27.7-1 enqueue.cc:2055, v2.30.7-1 :2321), so a buffer
  under 4 KiB gives chunks of 0 bytes and a division by zero (``DIVUP(nBytes, loopSize)``,
  :2362), and ``buffSizes`` is an ``int`` (src/include/comm.h:629): tracecli models a
  power of two from 128 KiB to 128 MiB (:data:`BUFFSIZE_CHOICES`: a step of 16 KiB, NVLS's
  smallest chunk, to 16 MiB, the largest chunk setting it takes) or -2, and refuses the
  rest. NCCL 2.18 alone defaults to 1 MiB on ARM hosts (``DEFAULT_BUFFSIZE_ARM``, v2.18.3-1
  init.cc:503, 519): tracecli models x86 hosts (``cpu``), and no ARM topology it models
  runs NVLS.
- **``OFI_NCCL_PROTOCOL``** (:func:`protocol`): ``SENDRECV`` or ``RDMA`` (``strcasecmp``,
  v1.16.3 src/nccl_ofi_net.cpp:203-223; another name fails plugin init, :219-221) overrides
  the platform's ``default_protocol``, which the plugin sets only where the user did not
  (platform-aws.cpp:684-686; nccl_ofi_net.cpp:183-203). It picks the transport's time class
  (``transports.time_class``) and the devices NCCL sees: the RDMA protocol groups a GPU's EFA
  rails into one device of their summed speed (src/nccl_ofi_rdma.cpp:7879-7889: a device per
  NIC group of the topology; :570-573: its speed times the group's rails), SENDRECV offers each
  NIC as a device of its own (src/nccl_ofi_sendrecv.cpp:2795: a device per provider
  ``fi_info``, one a NIC), so SENDRECV on a
  p5 shows NCCL 32 NICs of 100 Gb/s instead of 8 of 400, and NCCL's graph search runs on
  those (:func:`regraph`). With RDMA the plugin also checks that the NIC writes natively
  (platform-aws.cpp:728-735, ``validate_rdma_write``) and fails where it does not, a fact of
  the NIC's firmware tracecli does not know: it models the protocol as asked.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

from ...errors import CostModelError
from .timing import NCCL_STEPS
from .platforms import PLATFORMS
from .transports import EFA_CLASSES, efa_class, nccl_nics
from .versions import parse_version

__all__ = ["plugin_env", "platform_net", "chunking", "protocol", "check_env", "regraph", "VARS", "PROTOCOLS",
           "CHUNK_CHOICES", "BUFFSIZE_CHOICES"]

_P4 = (("NCCL_BUFFSIZE", "8388608"),)
_P5 = _P4 + (("NCCL_NVLSTREE_MAX_CHUNKSIZE", "524288"), ("NCCL_NVLS_CHUNKSIZE", "524288"))
# the platform table's settings go with its default protocol: its SENDRECV instance types (p4d,
# p4de) set the buffer, its RDMA ones (p5 and later) the NVLS chunks too; a platform's
# ``protocol``, hardware flags' the instance they match (transports.efa_class)
PROTOCOL_ENV = {"SENDRECV": _P4, "RDMA": _P5}
CLASS_ENV = {EFA_CLASSES[p]: env for p, env in PROTOCOL_ENV.items()}
PROTOCOLS = ("RDMA", "SENDRECV")
# the release that first reads each chunk setting (pipeline.py); NCCL_BUFFSIZE: every release
# modelled (v2.18.3-1 to v2.30.7-1 src/init.cc, NCCL_PARAM(BuffSize, "BUFFSIZE", -2))
CHUNK_FROM = {"NCCL_BUFFSIZE": (2, 18), "NCCL_NVLS_CHUNKSIZE": (2, 21),
              "NCCL_NVLSTREE_MAX_CHUNKSIZE": (2, 20)}
CHUNK_CHOICES = tuple(1 << k for k in range(14, 25))  # 16 KiB to 16 MiB, powers of two
# NCCL_BUFFSIZE bounds no release checks (init.cc computeBuffSizes takes any number but -2):
# tracecli's, a buffer whose step (buffSize / NCCL_STEPS) is one of CHUNK_CHOICES: 128 KiB to
# 128 MiB, powers of two (see the module)
BUFFSIZE_CHOICES = tuple(NCCL_STEPS * c for c in CHUNK_CHOICES)
CHOICES = {"NCCL_BUFFSIZE": BUFFSIZE_CHOICES, "NCCL_NVLS_CHUNKSIZE": CHUNK_CHOICES,
           "NCCL_NVLSTREE_MAX_CHUNKSIZE": CHUNK_CHOICES}
UNSET = ("NCCL_BUFFSIZE", "NCCL_NVLSTREE_MAX_CHUNKSIZE")  # -2: NCCL's own mark of unset
VARS = tuple(CHUNK_FROM) + ("OFI_NCCL_PROTOCOL",)


def platform_net(model) -> Optional[str]:
    """The network ``model``'s job names: its own ``net``, else its platform's (``None``: none)."""
    platform = PLATFORMS.get(model.name.removeprefix("nccl:"))
    return model.net or (platform.net if platform is not None else None)


def plugin_env(model) -> dict[str, str]:
    """The settings aws-ofi-nccl adds to NCCL's environment for ``model``'s job (see the
    module), those the job sets itself left out (the job's win)."""
    platform = PLATFORMS.get(model.name.removeprefix("nccl:"))
    if platform is not None and platform.net == "efa" and model.net in (None, "efa"):
        added = PROTOCOL_ENV.get(platform.protocol or "", ())
    elif platform is None and model.link_net == "efa":
        added = CLASS_ENV[efa_class(None, model.nics or 0, model.topology.gpus_per_node)]
    else:
        added = ()
    own = dict(model.nccl_env)
    return {k: v for k, v in added if k not in own}


def chunking(model) -> tuple[Optional[int], Optional[int], Optional[int]]:
    """``(NCCL_BUFFSIZE, NCCL_NVLS_CHUNKSIZE, NCCL_NVLSTREE_MAX_CHUNKSIZE)`` as NCCL reads them
    in ``model``'s job: its own settings, else the plugin's (``None``: unset)."""
    from .forced import _number

    env = {**plugin_env(model), **dict(model.nccl_env)}
    buffsize, nvls, tree = (_number(v, env[v]) if v in env else None for v in CHUNK_FROM)
    # a job's NCCL_BUFFSIZE=-2 is set, so the plugin keeps it, and NCCL reads it as unset
    # (init.cc:827 v2.30.7-1: envs[p] != -2 ? envs[p] : defaults[p]): NCCL's 4 MiB
    return None if buffsize == -2 else buffsize, nvls, tree


def protocol(env: Mapping[str, str]) -> Optional[str]:
    """The protocol ``OFI_NCCL_PROTOCOL`` names (``None``: unset, the platform's)."""
    value = env.get("OFI_NCCL_PROTOCOL")
    return None if value is None else value.upper()


def check_env(env: Mapping[str, str], version: str, net: Optional[str], nodes: int,
              platform_net: Optional[str] = None) -> None:
    """Refuse chunk settings NCCL ``version`` does not read or tracecli does not model, and an
    ``OFI_NCCL_PROTOCOL`` aws-ofi-nccl would fail on, or on a network it does not run (on one
    node: a platform's, ``platform_net``, where it names one other than EFA)."""
    from .forced import _number

    release = (parse_version(version) or (0, 0, 0))[:2]
    for var, since in CHUNK_FROM.items():
        if var not in env:
            continue
        if release < since:
            raise CostModelError(f"{var}: NCCL {version} does not read it (from "
                                 f"{since[0]}.{since[1]}; pipeline.py); leave it out")
        unset, choices = var in UNSET, CHOICES[var]
        try:
            value = _number(var, env[var])
        except CostModelError:
            value = None
        if value not in choices and not (value == -2 and unset):
            raise CostModelError(f"{var}={env[var]}: tracecli models a power of two from "
                                 f"{choices[0]} to {choices[-1]} bytes"
                                 + (" (or -2, unset)" if unset else "")
                                 + ": " + ", ".join(map(str, choices)))
    if "OFI_NCCL_PROTOCOL" in env:
        if protocol(env) not in PROTOCOLS:
            raise CostModelError(f"OFI_NCCL_PROTOCOL={env['OFI_NCCL_PROTOCOL']}: aws-ofi-nccl "
                                 "fails plugin init (\"Unable to find plugin protocol\"); use "
                                 "one of " + ", ".join(PROTOCOLS))
        if net != "efa" and (nodes > 1 or platform_net not in (None, "efa")):
            raise CostModelError(f"OFI_NCCL_PROTOCOL: tracecli models aws-ofi-nccl's protocols on "
                                 f"EFA (--net efa), not on {net or platform_net}; leave it out")


def regraph(model, chosen: Optional[str]):
    """``model`` with the graphs NCCL's search finds on the devices aws-ofi-nccl shows it under
    protocol ``chosen`` (see the module); the model itself where they do not change or its
    graph was NCCL's own (a log's)."""
    from .graph import GPUS, search_graphs
    from .nvls import search_nvls

    t = model.topology
    if chosen is None or t.nodes < 2 or model.link_net != "efa" or not model.nics \
            or model.device not in GPUS or not model.graph_source.startswith("estimated"):
        return model
    devices = nccl_nics(model.nics, t.gpus_per_node, "efa", model.version, chosen)[0]
    if devices == (model.nic_devices or model.nics):
        return model
    gpu, nvswitch = GPUS[model.device], model.intra == "nvswitch"
    ring, tree = search_graphs(gpu, t.gpus_per_node, t.nodes, nvswitch, model.nic_gbps,
                               devices, model.intra == "nvlink")
    nvls = search_nvls(gpu, t.gpus_per_node, t.nodes, nvswitch, model.nic_gbps, devices,
                       model.version) if model.nvls is not None else None
    return replace(model, ring=ring, tree=tree, nvls=nvls,
                   nic_devices=devices if devices != model.nics else None)
