"""A topology as the user gives it (nodes, GPUs per node, GPU, fabric, network, NCCL
version, a platform preset, a log of NCCL's own graph), checked, and the
:class:`~.model.NcclModel` it makes.

Every figure left out is filled from ``--platform``, else from the others: one node of
``--gpus`` GPUs by default; ``--gpus`` (the total) must equal nodes x GPUs per node; more
than one node needs a network (``--nic-gbps``, Gb/s per node summed over its NICs; NICs: the
platform's, else one per GPU). The NCCL version: ``--nccl``, else the log's, else the one the
installed torch loads (:func:`~.installed.installed_nccl`), else :data:`~.versions.DEFAULT_VERSION`.

>>> m, notes = topology_model(TopologyRequest(platform="dgx-h100", nodes=2, nccl="2.30.7"))
>>> m.gpus, m.topology.nodes, m.name
(16, 2, 'nccl:dgx-h100')
>>> topology_model(TopologyRequest(nodes=2, gpus_per_node=8, nccl="2.30.7"), gpus=10)
Traceback (most recent call last):
...
tracecli.errors.CostModelError: --gpus 10 is not --nodes 2 x --gpus-per-node 8 = 16; --gpus is the total, pass 16 or leave it out
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Optional

from ...errors import CalibrationError, CostModelError
from ...limits import DEFAULT_DEVICE
from .graph import GPUS, MESH_GPUS, NIC_PATHS
from .installed import installed_nccl
from .forced import restrict
from .model import NcclModel
from .platforms import PLATFORMS
from .transports import DEFAULT_NET, NETS
from .tuning import AlgoGraph
from .versions import DEFAULT_VERSION, RELEASES, constants_for

__all__ = ["TopologyRequest", "topology_model", "INTRA", "graphs_from_log", "nccl_version",
           "MODELLED"]

INTRA = ("nvswitch", "nvlink", "pcie")
DEFAULT_GPUS_PER_NODE = 8
MODELLED = "{}.{}-{}.{}".format(*RELEASES[0][0][:2], *RELEASES[-1][0][:2])  # the releases modelled
# Path types in NCCL's order (src/graph/topo.h of v2.28+: LOC NVL NVB C2C PIX PXB P2C PXN PHB
# SYS NET DIS); the log prints a graph's typeIntra/typeInter by these names.
PATHS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")


@dataclass(frozen=True)
class TopologyRequest:
    """The topology flags as given (``None``: not given)."""

    nodes: Optional[int] = None
    gpus_per_node: Optional[int] = None
    nic_gbps: Optional[float] = None
    nics: Optional[int] = None
    intra: Optional[str] = None
    nccl: Optional[str] = None
    device: Optional[str] = None  # the GPU; alone it does not ask for NCCL's model
    platform: Optional[str] = None
    nccl_log: Optional[str] = None
    net: Optional[str] = None  # the network transport (transports.py)
    nccl_env: Optional[tuple[tuple[str, str], ...]] = None  # NCCL settings the job forces
    nic_path: Optional[str] = None  # a GPU's PCIe path to its NIC (graph.NIC_PATHS)

    @property
    def given(self) -> bool:
        """Whether any flag that asks for NCCL's model was given (``device`` alone is not)."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "device")

    def flags(self) -> list[str]:
        """The flags given, as the user typed them (for messages)."""
        return ["--" + f.name.replace("_", "-") for f in fields(self)
                if f.name != "device" and getattr(self, f.name) is not None]


def nccl_version(asked: Optional[str], logged: Optional[str] = None) -> tuple[str, list[str]]:
    """The NCCL version whose constants apply, with what the user should hear of it."""
    if asked is not None:
        try:
            constants_for(asked)
        except ValueError as e:
            raise CostModelError(f"--nccl: {e}") from None
        return asked, []
    for found, where in ((logged, "the log's"), (installed_nccl(), "the installed torch's")):
        if found is None:
            continue
        try:
            constants_for(found)
        except ValueError:
            return DEFAULT_VERSION, [f"{where} NCCL {found} is not modelled ({MODELLED} are); "
                                     f"using NCCL {DEFAULT_VERSION}'s constants (pass --nccl)"]
        return found, []
    return DEFAULT_VERSION, []


def _shape(req: TopologyRequest, gpus: Optional[int], platform) -> tuple[int, int]:
    nodes, per = req.nodes, req.gpus_per_node
    if per is None and platform is not None:
        per = platform.gpus_per_node
    if per is None:
        if gpus is None:
            per = DEFAULT_GPUS_PER_NODE
        elif nodes is None:
            nodes, per = 1, gpus
        elif gpus % nodes:
            raise CostModelError(f"--gpus {gpus} does not split into --nodes {nodes} of "
                            "equal size; pass a multiple of --nodes, or --gpus-per-node")
        else:
            per = gpus // nodes
    if nodes is None:
        if gpus is None:
            nodes = 1
        elif gpus % per:
            raise CostModelError(f"--gpus {gpus} is not a whole number of nodes of "
                            f"--gpus-per-node {per}; pass a multiple of {per} (--gpus is the total)")
        else:
            nodes = gpus // per
    if gpus is not None and gpus != nodes * per:
        raise CostModelError(f"--gpus {gpus} is not --nodes {nodes} x --gpus-per-node "
                        f"{per} = {nodes * per}; --gpus is the total, pass {nodes * per} or leave it out")
    return nodes, per


def graphs_from_log(path: str, compcap: int):
    """``(ring, tree, log, tree pattern is TREE, NVLS graph or None)``: the graphs NCCL's
    search picked, read from a GRAPH log."""
    from .nccllog import read_nccl_log

    log = read_nccl_log(path)
    ring = log.graph("Ring")
    if ring is None:
        raise CalibrationError("no ring graph line ('Pattern 4, crossNic ..., "
                               "nChannels ..., bw .../...') in this log; run with "
                               "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH,TUNING,ENV and pass rank 0's log", path=path)
    tree = log.graph("Tree") or ring

    def graph(g) -> AlgoGraph:
        intra = PATHS.index(g.type_intra) if g.type_intra in PATHS else len(PATHS)
        inter = PATHS.index(g.type_inter) if g.type_inter in PATHS else len(PATHS)
        # tuning.cc:514-536: LL128 on sm90+ needs typeInter <= PXN and typeIntra <= NVB;
        # before, typeInter <= PXB
        ll128 = inter <= PATHS.index("PXN") and intra <= PATHS.index("NVB") if compcap >= 90 \
            else inter <= PATHS.index("PXB")
        return AlgoGraph(g.n_channels, g.bw_intra, g.bw_inter, nvlink=g.type_intra == "NVL",
                         ll128=ll128, same_channels=g.same_channels)

    # NCCL prints the NVLS graph (Pattern 5) only where it supports NVLS (v2.30.7-1
    # src/init.cc:1214-1217); no such line, or one of no channels: no NVLS
    nvls = log.graph("NVLS")
    nvls_graph = graph(nvls) if nvls is not None and nvls.n_channels > 0 else None
    return graph(ring), graph(tree), log, tree.pattern == 3, nvls_graph  # 3: PATTERN_TREE


def topology_model(req: TopologyRequest, gpus: Optional[int] = None) -> tuple[NcclModel, list[str]]:
    """NCCL's model of the topology ``req`` describes on ``gpus`` ranks in all (``None``:
    what the topology says), with the notices the user should hear."""
    platform = None
    if req.platform is not None:
        if req.platform not in PLATFORMS:
            raise CostModelError(f"unknown platform {req.platform!r}; use one of "
                            + ", ".join(PLATFORMS))
        platform = PLATFORMS[req.platform]
    device = req.device or (platform.gpu if platform else DEFAULT_DEVICE)
    if device not in GPUS:
        raise CostModelError(f"NCCL's model needs a GPU: --device {device} is not one; use "
                        "one of " + ", ".join(GPUS))
    if platform is not None and req.device is not None and req.device != platform.gpu:
        raise CostModelError(f"--platform {platform.name} has {platform.gpu} GPUs, not "
                        f"--device {req.device}; leave one out")
    if req.net is not None and req.net not in NETS:
        raise CostModelError(f"unknown --net {req.net!r}; use one of " + ", ".join(NETS))
    if req.intra is not None and req.intra not in INTRA:
        raise CostModelError(f"unknown --intra {req.intra!r}; use one of " + ", ".join(INTRA))
    if req.nic_path is not None and req.nic_path not in NIC_PATHS:
        raise CostModelError(f"unknown --nic-path {req.nic_path!r}; use one of "
                             + ", ".join(NIC_PATHS))
    if req.nic_path is not None and req.nccl_log is not None:
        raise CostModelError("--nic-path with --nccl-log: the log's graph states the path NCCL "
                             "found (its typeInter); leave --nic-path out")
    logged_graph = None
    if req.nccl_log is not None:
        logged_graph = graphs_from_log(req.nccl_log, GPUS[device].compcap)
        log = logged_graph[2]
        shaped = any(v is not None for v in (req.nodes, req.gpus_per_node, req.platform, gpus))
        if not shaped and log.n_ranks and log.n_nodes and log.n_ranks % log.n_nodes == 0:
            req = replace(req, nodes=log.n_nodes, gpus_per_node=log.n_ranks // log.n_nodes)
    nodes, per = _shape(req, gpus, platform)
    nic_gbps = req.nic_gbps if req.nic_gbps is not None else (platform.nic_gbps if platform else None)
    nics = req.nics if req.nics is not None else (platform.nics if platform else per)
    if nodes > 1 and (nic_gbps is None or not nic_gbps > 0 or nics < 1):
        why = ("--nics 0" if nics < 1 else f"--nic-gbps {nic_gbps:g}" if nic_gbps is not None
               else "no --nic-gbps given")
        raise CostModelError(f"{nodes} nodes need a network between them ({why}): pass "
                        "--nic-gbps (Gb/s per node, summed over its NICs: 3200 for 8 x 400) with "
                        "at least one NIC, or --platform")
    intra = req.intra or ("nvswitch" if platform is None or platform.nvswitch
                          else "nvlink" if platform.mesh else "pcie")
    nvswitch = intra == "nvswitch"
    logged, notices = None, []
    if logged_graph is not None:
        ring, tree, log, pattern_tree, nvls = logged_graph
        logged = log.version.split("+")[0] if log.version else None
        if log.n_ranks is not None and (log.n_nodes, log.n_ranks) != (nodes, nodes * per):
            notices.append(f"{req.nccl_log} is a log of {log.n_ranks} ranks on {log.n_nodes} "
                           f"node(s); its graph is used on {nodes} x {per} as asked")
    version, said = nccl_version(req.nccl, logged)
    notices += said
    net = (req.net or (platform.net if platform else DEFAULT_NET)) if nodes > 1 else None
    # a mesh tracecli cannot estimate (more than a 4-GPU board) stands on the log's graph
    mesh = intra == "nvlink" and (per <= MESH_GPUS or req.nccl_log is None)
    model = NcclModel.for_topology(device, nodes, per, nvswitch, nic_gbps or 0.0, nics, version,
                                   net, mesh=mesh, nic_path=req.nic_path)
    name = f"nccl:{platform.name}" if platform else "nccl"
    fabric = {"nvswitch": "NVSwitch", "nvlink": "NVLink without a switch"}.get(intra, "PCIe")
    network = f", {nic_gbps:g} Gb/s network per node over {nics} NIC{'s' if nics != 1 else ''}" \
        if nodes > 1 else ""
    source = f"NCCL {version} model, {nodes} x {per} {device} on {fabric}{network}"
    if platform is not None:
        source += f"; {platform.source}"
    if net is not None:
        source += f"; network transport {net}"
    same_net = platform is not None and net == platform.net  # --net leaves the platform's stack
    model = replace(model, name=name, source=source, intra=intra, net=net,
                    nic_gbps=nic_gbps if nodes > 1 else None, nics=nics if nodes > 1 else None,
                    device=device, net_latency=platform.net_latency if same_net else None)
    if req.nccl_log is not None:
        model = replace(model, ring=ring, tree=tree, tree_pattern_tree=pattern_tree, nvls=nvls,
                        graph_source=f"NCCL's own graph, from {req.nccl_log}")
    return _forced(model, req, logged_graph[2] if logged_graph else None, notices), notices


def _forced(model: NcclModel, req: TopologyRequest, log, notices: list[str]) -> NcclModel:
    """``model`` under the NCCL settings the log's run forced and ``--nccl-env`` gives (the
    latter wins), each checked where it was given."""
    env, given = {}, dict(req.nccl_env or ())
    # NCCL_ALGO/NCCL_PROTO fail the communicator where NCCL 2.19-2.20 load aws-ofi-nccl's
    # tuner, which NCCL_TUNER_PLUGIN decides (ofi_tuner.check_env): checked beside it
    plugin = {k: v for k, v in [*((k, v[0]) for k, v in (log.env if log else {}).items()),
                                *given.items()] if k == "NCCL_TUNER_PLUGIN"}

    def alone(name: str, value: str) -> dict:
        return {name: value, **plugin} if name in ("NCCL_ALGO", "NCCL_PROTO") else {name: value}

    if log is not None and log.env:
        for name, (value, line) in log.env.items():
            if name in given:
                continue
            try:
                restrict(model, alone(name, value))
            except CostModelError as e:
                raise CalibrationError(f"the run's {e} (or pass --nccl-env {name}=VALUE)",
                                       path=req.nccl_log, line=line) from None
            env[name] = value
        said = " ".join(f"{k}={v[0]}" for k, v in sorted(log.env.items()) if k not in given)
        replaced = " ".join(f"{k}={v[0]}" for k, v in sorted(log.env.items()) if k in given)
        notices.append(f"{req.nccl_log}: " + (f"the run set {said}; NCCL is modelled so" if said
                                              else "") + ("; " if said and replaced else "")
                       + (f"--nccl-env replaces the run's {replaced}" if replaced else ""))
    try:
        for name, value in given.items():
            restrict(model, alone(name, value))
            env[name] = value
        return restrict(model, env) if env else model
    except CostModelError as e:
        raise CostModelError(f"--nccl-env {e}") from None


def nccl_cost_model(req: TopologyRequest, gpus: Optional[int] = None,
                    nccl_tests: Optional[str] = None):
    """The cost model of a plan or replay with a topology: NCCL's model, with the nccl-tests
    output at ``nccl_tests`` answering the sizes it measured. Returns it with its notices
    (which sources may be mixed: :func:`tracecli.costs.resolve.conflict`)."""
    if nccl_tests is None:
        return topology_model(req, gpus)
    from .measured import from_nccl_tests
    from .nccl_tests import read_nccl_tests

    run = read_nccl_tests(nccl_tests)
    if gpus is None and req.gpus_per_node is None and req.platform is None and run.ranks \
            and not (req.nodes is None and req.nccl_log is not None):
        gpus = run.ranks  # the ranks it measured (one node of them unless --nodes says)
    model, notices = topology_model(req, gpus)
    measured, said = from_nccl_tests(model, run)
    return measured, notices + said
