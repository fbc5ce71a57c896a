"""Option groups shared by commands: how to read TRACE, compute times, the cost model, and
how ranks are launched; and the library's requests made of them. (Strategy options are in
:mod:`.strategy`, output options in :mod:`.output`.)"""

from __future__ import annotations

from typing import Optional

import click

from ..analysis.compute import DEVICES
from ..costs import ALGORITHMS, DEFAULT_NETWORK, NETWORKS
from ..parsers import FORMATS
from ..pipeline import DEFAULT_GPUS, ComputeRequest, CostRequest
from ..replay.jobs import BACKENDS
from .types import MS, Number, options

__all__ = ["trace_argument", "load_options", "compute_options", "network_options",
           "cost_options", "ranks_option", "launch_options", "compute_from", "cost_from",
           "launch_from"]

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
    click.option("--device", type=click.Choice(list(DEVICES)), default="h100", show_default=True,
                 help="Device preset for estimated op times (traces with shapes but no timings)."),
    click.option("--op-times", metavar="FILE",
                 help='Measured times, JSON: {OP_OR_LAYER: ms, ..., "forward_ms": ms}.'),
    click.option("--backward-ms", type=MS, help="Measured backward time, ms (needed for op "
                 "lists without --op-times; rescales estimates). Default: none."),
    click.option("--forward-ms", type=MS, help="Measured forward time, ms (default: the trace's "
                 "or estimated, else half of backward)."),
    click.option("--update-ms", type=MS, help="Optimizer update time after the last all-reduce, "
                 "ms (default: the trace's optimizer step where it records one, else 0)."),
)

network_options = options(
    click.option("--network", type=click.Choice(list(NETWORKS)),
                 help="Interconnect preset (default: fitted to a profiler trace's own "
                 f"all-reduces, else {DEFAULT_NETWORK})."),
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
)

cost_options = options(
    click.option("--gpus", type=click.IntRange(1, 1 << 20), help="Data-parallel ranks to plan "
                 "for (default: the calibration's ranks, else the trace's world size, else "
                 f"{DEFAULT_GPUS})."),
    network_options)

ranks_option = click.option("--gpus", type=click.IntRange(2, 4096), default=2, show_default=True,
                            help="Ranks to start (ignored under torchrun, which sets the world).")

launch_options = options(
    click.option("--backend", type=click.Choice(list(BACKENDS)), default="auto",
                 show_default=True, help="auto: NCCL when --gpus CUDA devices are visible, else gloo."),
    click.option("--timeout", type=Number(1, 86400, "s"), default=30.0, show_default=True,
                 help="Collective timeout, s; a hung or dead rank stops all ranks within it."),
    click.option("--oversubscribe", is_flag=True, help="Start more CPU ranks than this machine "
                 "holds (two per core, within available memory) or more CUDA ranks than devices."),
    click.option("--inject-fault", hidden=True, metavar="RANK:MODE",
                 help="Testing: make RANK raise, exit or hang."),
)


def compute_from(kw) -> ComputeRequest:
    return ComputeRequest(kw["device"], kw["op_times"], kw["backward_ms"], kw["forward_ms"],
                          kw["update_ms"])


def cost_from(kw, gpus: Optional[int] = None) -> CostRequest:
    return CostRequest(gpus if gpus is not None else kw["gpus"], kw["network"], kw["algorithm"],
                       kw["alpha_us"], kw["bandwidth_gbps"], kw["launch_us"], kw["calibration"])


def launch_from(kw):
    """The launch the options ask for (``--gpus``, ``--backend``, ``--timeout``, a fault)."""
    from ..replay import FAULT_MODES, Fault, Launch

    fault = None
    if kw["inject_fault"]:
        rank, _, mode = kw["inject_fault"].partition(":")
        if not rank.isdigit() or len(rank) > 6 or mode not in FAULT_MODES:
            raise click.BadParameter(f"expected RANK:MODE with MODE one of "
                                     f"{', '.join(FAULT_MODES)}", param_hint="--inject-fault")
        fault = Fault(int(rank), mode)
    return Launch(kw["gpus"], kw["backend"], kw["timeout"], fault)
