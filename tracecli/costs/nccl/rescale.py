"""An NCCL model of the same node shape at another rank count (``NcclModel.on``): the graphs
NCCL's search picks (ring, tree, NVLS) depend on the node count, so an estimated graph is
estimated anew, a log's graph is kept as NCCL printed it, and the job's NCCL settings are
checked anew against the new communicator (:mod:`.forced`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...errors import CostModelError
from ..topology import Topology
from .forced import restrict
from .graph import GPUS
from .platforms import PLATFORMS

if TYPE_CHECKING:
    from .model import NcclModel

__all__ = ["on_gpus"]


def on_gpus(model: "NcclModel", gpus: int) -> "NcclModel":
    """``model``'s node shape on ``gpus`` ranks (whole nodes; fewer than a node: one node)."""
    from .model import ESTIMATED, NcclModel

    g = model.topology.gpus_per_node
    topo = Topology(1, gpus) if gpus < g else Topology(max(1, gpus // g), g)
    if gpus >= g and gpus % g:
        raise CostModelError(f"{gpus} GPUs do not fill nodes of {g}; pass a multiple of {g}")
    p = PLATFORMS.get(model.name.removeprefix("nccl:"))
    latency = model.net_latency if topo.nodes > 1 else None
    if model.graph_source == ESTIMATED and p is not None and model.intra != "nvlink" \
            and (model.device, model.intra) == (p.gpu, "nvswitch" if p.nvswitch else "pcie") \
            and model.nic_gbps in (None, p.nic_gbps) and model.nics in (None, p.nics) \
            and model.nic_path is None:
        return _forced(model, replace(NcclModel.for_platform(p.name, topo.nodes, model.version),
                                      topology=topo, cpu=model.cpu,
                                      net=model.net or (p.net if topo.nodes > 1 else None),
                                      net_latency=latency))
    nic_gbps = model.nic_gbps or (p.nic_gbps if p else None)  # a platform's, on one node
    nics = model.nics or (p.nics if p else None)
    network = topo.nodes == 1 or (nic_gbps and nics)
    if model.graph_source == ESTIMATED and model.device in GPUS and network:
        m = NcclModel.for_topology(model.device, topo.nodes, topo.gpus_per_node,
                                   model.intra == "nvswitch", nic_gbps or 0.0, nics or 0,
                                   model.version, model.net or (p.net if p else None),
                                   mesh=model.intra == "nvlink", nic_path=model.nic_path)
        return _forced(model, replace(m, name=model.name, cpu=model.cpu, net_latency=latency))
    if model.graph_source == ESTIMATED and topo.nodes > 1:  # one node's estimate, no network
        raise CostModelError(f"{gpus} GPUs are {topo.nodes} nodes of {g}, and this model is of "
                             "one node, which keeps no network: pass the run's --nodes and "
                             "--gpus-per-node, with its --nic-gbps and --nics (or --platform)")
    return replace(model, topology=topo)  # a log's graph: as NCCL printed it


def _forced(model: "NcclModel", other: "NcclModel") -> "NcclModel":
    """``other`` (``model`` at another scale) under the job's NCCL settings, checked anew
    against its topology (channels.py bounds its own communicator's channels)."""
    return restrict(other, dict(model.nccl_env)) if model.nccl_env else other
