"""What an NCCL model says of itself as data: the topology ``collective --json`` reports and
the description a plan file keeps (``cost_model``): the hardware, the graphs and where they
came from, the fitted constants that time the picks, the tuner NCCL runs and NCCL's picks at
sizes from 8 B to 16 GiB. Choosing and timing live in :mod:`.model`; its one-line summary in
:mod:`.report`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from ...errors import CostModelError
from .ofi_tuner import tuner_doc
from .versions import constants_for

if TYPE_CHECKING:
    from .model import NcclModel

__all__ = ["topology_doc_of", "description_of", "picks_of"]

SIZES = tuple(1 << k for k in range(3, 35, 2))  # the sizes a description lists NCCL's picks at


def topology_doc_of(model: "NcclModel") -> dict[str, Any]:
    """The topology as ``collective --json`` reports it."""
    t = model.topology
    return {"nodes": t.nodes, "gpus_per_node": t.gpus_per_node, "gpus": t.ranks,
            **_hardware(model), "nccl_version": model.version,
            "constants": constants_for(model.version).tag, **_timing(model)}


def description_of(model: "NcclModel", line: tuple[int, int], kinds: Iterable) -> dict[str, Any]:
    """The model as a plan file keeps it: ``line``, the sizes its secant joins (``linear``);
    ``kinds``, the collectives whose picks it lists."""
    return {"name": model.name, "model": "nccl", "nccl_version": model.version,
            "constants": constants_for(model.version).tag, "gpus": model.gpus,
            "nodes": model.topology.nodes, "gpus_per_node": model.topology.gpus_per_node,
            **_hardware(model), **_timing(model),
            "linear": f"secant of NCCL's curve between {line[0]} and {line[1]} bytes",
            "algorithm": {k.value: picks_of(model, k, SIZES) for k in kinds},
            "source": model.source}


def picks_of(model: "NcclModel", kind, sizes) -> Optional[list]:
    """``[[bytes, algorithm, protocol], ...]`` NCCL picks for ``kind``; ``None`` where the job's
    NCCL settings leave it no algorithm (NCCL fails that collective, but runs the others)."""
    try:
        return [[n, *model.choice(kind, n)[:2]] for n in sizes]
    except CostModelError:
        return None


def _hardware(model: "NcclModel") -> dict[str, Any]:
    return {"device": model.device, "intra": model.intra, "nic_gbps": model.nic_gbps,
            "nics": model.nics, "net": model.link_net, "nic_path": model.nic_path,
            "nccl_env": dict(model.nccl_env)}


def _timing(model: "NcclModel") -> dict[str, Any]:
    """Ring, tree and NVLS graphs (``nvls`` null where NCCL would not enable it), the fitted
    constants that time the picks (null where none) and the tuner."""
    graph = {"ring": dict(model.ring.__dict__), "tree": dict(model.tree.__dict__),
             "nvls": None if model.nvls is None else dict(model.nvls.__dict__),
             "source": model.graph_source}
    hit = model.time_params()
    timed = None if hit is None else {"class": hit[1], **{
        k: v for k, v in hit[0].__dict__.items() if k != "launch"},  # launch: training only
        "scale": _scale(model, hit[1])}
    return {"graph": graph, "time_model": timed, "tuner": tuner_doc(model)}


def _scale(model: "NcclModel", used: str) -> dict[str, Any]:
    """The most nodes and GPUs a node the class's training tables ran on, and whether this
    topology is beyond either (its times and bands extrapolated: accuracy.beyond_scale)."""
    from .accuracy import beyond_scale, measured_scale

    nodes, per = measured_scale(used)
    t = model.topology
    return {"measured_nodes": nodes, "measured_gpus_per_node": per,
            "beyond": beyond_scale(used, t.nodes, t.gpus_per_node) is not None}
