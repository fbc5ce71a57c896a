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
from .platforms import PLATFORMS
from .transports import EFA_CLASSES, efa_class, nccl_nics
from .versions import parse_version

__all__ = ["plugin_env", "platform_net", "chunking", "protocol", "check_env", "regraph", "VARS", "PROTOCOLS",
           "CHUNK_CHOICES"]

_P4 = (("NCCL_BUFFSIZE", "8388608"),)
_P5 = _P4 + (("NCCL_NVLSTREE_MAX_CHUNKSIZE", "524288"), ("NCCL_NVLS_CHUNKSIZE", "524288"))
# the platform table's settings go with its default protocol: its SENDRECV instance types (p4d,
# p4de) set the buffer, its RDMA ones (p5 and later) the NVLS chunks too; a platform's
# ``protocol``, hardware flags' the instance they match (transports.efa_class)
PROTOCOL_ENV = {"SENDRECV": _P4, "RDMA": _P5}
CLASS_ENV = {EFA_CLASSES[p]: env for p, env in PROTOCOL_ENV.items()}
PROTOCOLS = ("RDMA", "SENDRECV")
# the release that first reads each chunk setting (pipeline.py)
CHUNK_FROM = {"NCCL_NVLS_CHUNKSIZE": (2, 21), "NCCL_NVLSTREE_MAX_CHUNKSIZE": (2, 20)}
CHUNK_CHOICES = tuple(1 << k for k in range(14, 25))  # 16 KiB to 16 MiB, powers of two
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
    return tuple(_number(v, env[v]) if v in env else None  # type: ignore[return-value]
                 for v in ("NCCL_BUFFSIZE", "NCCL_NVLS_CHUNKSIZE", "NCCL_NVLSTREE_MAX_CHUNKSIZE"))


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
        unset = var.startswith("NCCL_NVLSTREE")  # -2: NCCL's own mark of unset
        try:
            value = _number(var, env[var])
        except CostModelError:
            value = None
        if value not in CHUNK_CHOICES and not (value == -2 and unset):
            raise CostModelError(f"{var}={env[var]}: tracecli models a power of two from "
                                 f"{CHUNK_CHOICES[0]} to {CHUNK_CHOICES[-1]} bytes"
                                 + (" (or -2, unset)" if unset else "")
                                 + ": " + ", ".join(map(str, CHUNK_CHOICES)))
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
