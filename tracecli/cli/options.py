"""Option groups shared by commands: how to read TRACE, compute times, the cost model, and
how ranks are launched; and the library's requests made of them. (Strategy options are in
:mod:`.strategy`, output options in :mod:`.output`.)"""

from __future__ import annotations

from typing import Optional

import click

from ..analysis.compute import DEVICES
from ..costs import ALGORITHMS, DEFAULT_NETWORK, NETWORKS
from ..costs.nccl.forced import KNOWN as NCCL_SETTINGS
from ..costs.nccl.graph import GPUS, NIC_PATHS
from ..costs.nccl.platforms import PLATFORMS
from ..costs.nccl.request import INTRA, MODELLED, TopologyRequest
from ..costs.nccl.transports import NET_HELP, NETS
from ..costs.nccl.versions import DEFAULT_VERSION
from ..limits import DEFAULT_DEVICE, MAX_RANKS
from ..parsers import FORMATS
from ..costs.resolve import conflict
from ..pipeline import DEFAULT_GPUS, ComputeRequest, CostRequest
from ..replay.jobs import BACKENDS, Ranks
from .inputs import given
from .types import MS, Number, options

__all__ = ["trace_argument", "load_options", "compute_options", "network_options",
           "cost_options", "ranks_option", "process_options", "compute_from", "cost_from",
           "ranks_from", "topology_options", "gpu_option", "topology_from", "checked_topology"]

def _trace_value(ctx, param, value):
    """One path as given; several (a run's rank files) as a tuple; none as ``None``."""
    if not value:
        return None
    return value[0] if len(value) == 1 else tuple(value)


trace_argument = click.argument("trace", nargs=-1, metavar="[TRACE | RUN_DIR | RANK_FILES...]",
                                callback=_trace_value)

load_options = options(
    click.option("--format", "fmt", type=click.Choice(FORMATS),
                 help="Trace format (default: detected from the content)."),
    click.option("--sizes", "sizes", metavar="FILE",
                 help="Sizes sidecar: shapes for a TensorFlow op list, parameter names "
                 "for a profiler trace (default: TRACE.sizes.json beside the trace)."),
    click.option("--step", type=click.IntRange(0, 1 << 62), metavar="K",
                 help="Profiler traces: use ProfilerStep#K (default: the last step with "
                 "a backward pass)."),
)

compute_options = options(
    click.option("--device", type=click.Choice(list(DEVICES)), help="Device preset for "
                 "estimated op times (traces with shapes but no timings), and the GPU of NCCL's "
                 "model with a topology (default: --platform's GPU, else h100)."),
    click.option("--op-times", metavar="FILE",
                 help='Measured times, JSON: {OP_OR_LAYER: ms, ..., "forward_ms": ms}.'),
    click.option("--backward-ms", type=MS, help="Measured backward time, ms (needed for op "
                 "lists without --op-times; rescales estimates). Default: none."),
    click.option("--forward-ms", type=MS, help="Measured forward time, ms (default: the trace's "
                 "or estimated, else half of backward)."),
    click.option("--update-ms", type=MS, help="Optimizer update time after the last all-reduce, "
                 "ms (default: the trace's optimizer step where it records one, else 0)."),
)


def _nccl_env(ctx, param, value):
    """``NAME=VALUE`` pairs as given (the last of a name wins, as in a shell); none: None."""
    pairs = {}
    for item in value:
        name, eq, setting = item.partition("=")
        if not eq or name.strip() not in NCCL_SETTINGS:
            raise click.BadParameter(f"{item!r}: give NAME=VALUE with NAME one of "
                                     + ", ".join(NCCL_SETTINGS), param_hint="--nccl-env")
        pairs[name.strip()] = setting
    return tuple(pairs.items()) or None


_NCCL_HELP = (f"NCCL version whose tuning constants apply, {MODELLED} (default: the NCCL of the "
              f"installed torch if it has one, else {DEFAULT_VERSION}).")

topology_options = options(
    click.option("--nodes", type=click.IntRange(1, 1 << 16), help="Nodes (machines); with any "
                 "topology flag, collectives are costed by NCCL's own model (default: 1)."),
    click.option("--gpus-per-node", type=click.IntRange(1, 1024), help="GPUs per node "
                 "(default: --platform's, else --gpus / --nodes, else 8); --gpus is the total."),
    click.option("--nic-gbps", type=Number(0, 1e6, "Gb/s"), help="Network bandwidth per node, "
                 "Gb/s summed over its NICs: 8 x 400 = 3200 on a DGX H100 (default: --platform's)."),
    click.option("--nics", type=click.IntRange(0, 1024), help="NICs per node (default: "
                 "--platform's, else one per GPU)."),
    click.option("--intra", type=click.Choice(INTRA), help="Fabric inside a node: nvswitch, "
                 "nvlink (GPUs linked to each other, no switch: a 4-GPU board) or pcie "
                 "(default: --platform's, else nvswitch)."),
    click.option("--nic-path", type=click.Choice(NIC_PATHS), help="PCIe path from a GPU to "
                 "its NIC as NCCL types it: pix or pxb (behind the GPU's PCIe switches), pxn "
                 "(through another GPU), phb (through the CPU's host bridge), sys (across "
                 "sockets); beyond pxb (pxn from compute capability 9.0) NCCL enables no LL128 "
                 "(default: pxb)."),
    click.option("--nccl", "nccl", metavar="VERSION", help=_NCCL_HELP),
    click.option("--platform", type=click.Choice(list(PLATFORMS)), help="Named platform: GPU, "
                 "GPUs per node, fabric, NICs (sources in docs/costs.md)."),
    click.option("--nccl-log", metavar="FILE", help="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH,TUNING,ENV "
                 "log of rank 0: NCCL's own graph (channels, bandwidths) replaces the estimate."),
    click.option("--net", type=click.Choice(NETS), help=NET_HELP),
    click.option("--nccl-env", metavar="NAME=VALUE", multiple=True, callback=_nccl_env,
                 help="An NCCL setting the job forces, as its environment has it (repeat for "
                 "several): " + ", ".join(NCCL_SETTINGS) + "; e.g. NCCL_ALGO=Ring (default: "
                 "those the --nccl-log run printed, else none)."),
)

gpu_option = click.option("--device", type=click.Choice(list(GPUS)), help="GPU of NCCL's model "
                          "(default: --platform's, else h100); GH200 nodes of 4 on NVLink: "
                          "--platform cscs-alps-gh200 or --gpus-per-node 4 --intra nvlink.")

network_options = options(
    click.option("--network", type=click.Choice(list(NETWORKS)),
                 help="Flat alpha-beta preset: one per-step latency and one bus bandwidth for "
                 "every link, no nodes and no NCCL algorithm choice (default: fitted to a "
                 f"profiler trace's own all-reduces, else {DEFAULT_NETWORK}); not with the "
                 "topology flags."),
    click.option("--algorithm", type=click.Choice(ALGORITHMS), default="ring", show_default=True,
                 help="All-reduce algorithm of the cost model."),
    click.option("--alpha-us", type=Number(0, 1e7, "us"),
                 help="Per-step latency override, us (default: the preset's)."),
    click.option("--bandwidth-gbps", type=Number(0, 1e6, "GB/s", low_open=True),
                 help="Bus bandwidth override, GB/s = 10^9 bytes/s as nccl-tests' busbw "
                 "(default: the preset's)."),
    click.option("--launch-us", type=Number(0, 1e7, "us"), default=0.0, show_default=True,
                 help="Per-bucket launch overhead, us."),
    click.option("--calibration", metavar="FILE", help="Cost model from tracecli calibrate --out "
                 "(its rank count becomes the default --gpus)."),
    click.option("--nccl-tests", metavar="FILE", help="Cost source: nccl-tests output "
                 "(all_reduce_perf ...: its stdout or its -J JSON file); measured sizes answer with their measurement, NCCL's "
                 "model (of the topology flags) shapes the curve between and beyond them."),
    topology_options,
)

cost_options = options(
    click.option("--gpus", type=click.IntRange(1, MAX_RANKS), help="Data-parallel ranks to plan "
                 "for (default: the calibration's ranks, else the trace's world size, else "
                 f"{DEFAULT_GPUS})."),
    network_options)

ranks_option = click.option("--gpus", type=click.IntRange(2, 4096), default=Ranks.gpus, show_default=True,
                            help="Ranks to start (ignored under torchrun, which sets the world).")

process_options = options(
    click.option("--backend", type=click.Choice(list(BACKENDS)), default=Ranks.backend,
                 show_default=True, help="auto: NCCL when --gpus CUDA devices are visible, else gloo."),
    click.option("--timeout", type=Number(1, 86400, "s"), default=Ranks.timeout_s, show_default=True,
                 help="Collective timeout, s: a rank that hangs or dies stops all ranks within "
                 "it (and 3 s to stop them); NCCL's own timeout adds the emulated step."),
    click.option("--oversubscribe", is_flag=True, help="Start more CPU ranks than this machine "
                 "holds (two per core, within available memory) or more CUDA ranks than devices."),
    click.option("--inject-fault", hidden=True, metavar="RANK:MODE",
                 help="Testing: make RANK raise, exit or hang."),
)


def compute_from(kw) -> ComputeRequest:
    platform = kw.get("platform")
    device = kw["device"] or (PLATFORMS[platform].gpu if platform else DEFAULT_DEVICE)
    return ComputeRequest(device, kw["op_times"], kw["backward_ms"], kw["forward_ms"],
                          kw["update_ms"])


_TOPOLOGY_KEYS = ("nodes", "gpus_per_node", "nic_gbps", "nics", "intra", "nccl", "platform",
                  "nccl_log", "net", "nccl_env", "nic_path")


def topology_from(kw) -> TopologyRequest:
    """The topology flags given (``--device`` too, where the command has it)."""
    return TopologyRequest(**{k: kw.get(k) for k in _TOPOLOGY_KEYS}, device=kw.get("device"))


def cost_from(kw, gpus: Optional[int] = None) -> CostRequest:
    """The cost model asked for (``--algorithm`` and ``--launch-us`` only where given);
    sources that may not be mixed are a usage error saying which (:func:`conflict`)."""
    topology = topology_from(kw)
    ctx = click.get_current_context(silent=True)
    stated = {k: kw[k] if ctx is None or given(ctx, k) else None for k in ("algorithm", "launch_us")}
    request = CostRequest(gpus if gpus is not None else kw["gpus"], kw["network"],
                          stated["algorithm"], kw["alpha_us"], kw["bandwidth_gbps"],
                          stated["launch_us"], kw["calibration"],
                          topology if topology.given or kw.get("nccl_tests") is not None else None,
                          kw.get("nccl_tests"))
    problem = conflict(request)
    if problem:
        raise click.UsageError(problem)
    if topology.given and request.nccl_tests is None:
        checked_topology(topology, request.gpus)
    return request


def checked_topology(topology: TopologyRequest, gpus: Optional[int]):
    """NCCL's model of ``topology`` on ``gpus`` ranks, and its notices; flags that describe
    no possible topology are a usage error saying why."""
    from ..costs.nccl.request import topology_model
    from ..errors import CostModelError

    try:
        return topology_model(topology, gpus)
    except CostModelError as exc:
        raise click.UsageError(exc.message) from None


def ranks_from(kw):
    """The ranks the options ask for (``--gpus``, ``--backend``, ``--timeout``, a fault)."""
    from ..replay import FAULT_MODES, Fault, Ranks

    fault = None
    if kw["inject_fault"]:
        rank, _, mode = kw["inject_fault"].partition(":")
        if not rank.isdigit() or len(rank) > 6 or mode not in FAULT_MODES:
            raise click.BadParameter(f"expected RANK:MODE with MODE one of "
                                     f"{', '.join(FAULT_MODES)}", param_hint="--inject-fault")
        fault = Fault(int(rank), mode)
    return Ranks(kw["gpus"], kw["backend"], kw["timeout"], fault)
