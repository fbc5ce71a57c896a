"""``tracecli collective OP``: what one collective costs on a topology, size by size, as
NCCL's own model predicts it (and, with ``--measured``, as nccl-tests measured it)."""

from __future__ import annotations

import click

from ..costs.collectives import NAMES
from ..limits import MAX_RANKS
from ..units import format_size
from .results import CollectiveResult
from .group import cli
from .options import checked_topology, gpu_option, topology_from, topology_options
from .output import Output, emit, json_option, notice
from .types import SIZES

OPS = tuple(names.op for names in NAMES.values())


@cli.command()
@click.argument("op", type=click.Choice(OPS), metavar="OP")
@click.option("--gpus", type=click.IntRange(1, MAX_RANKS), help="Ranks in all (default: "
              "--nodes x --gpus-per-node; must agree with them).")
@topology_options
@gpu_option
@click.option("--sizes", "sizes", type=SIZES, help="Sizes as nccl-tests' size column: a comma "
              "list (1M,25MiB) or a range doubling (8:16G) (default: --measured's sizes, else "
              "8:16G).")
@click.option("--measured", metavar="FILE", help="nccl-tests output of OP (all_reduce_perf, "
              "all_gather_perf, reduce_scatter_perf, broadcast_perf; its stdout or its -J JSON "
              "file): adds measured time and "
              "error per size; a run of one thread driving N GPUs (-g N) is compared with "
              "predictions that add that thread's launches.")
@json_option("Print the table as JSON (docs/json.md).")
def collective(op, gpus, sizes, measured, **kw):
    """What collective OP (allreduce, allgather, reducescatter, broadcast) costs per size
    on a topology: the (algorithm, protocol) NCCL's model picks, how long it takes (fitted on
    public nccl-tests tables) with its cross-validated error band, algbw and busbw.

    \b
    tracecli collective allreduce --platform dgx-h100 --nodes 2
    tracecli collective allgather --nodes 4 --gpus-per-node 8 --nic-gbps 1600 --device a100
    tracecli collective allreduce --platform dgx-h100 --measured all_reduce_perf.txt
    """
    from ..costs.nccl.nccl_tests import read_nccl_tests
    from ..costs.nccl.sweep import check_measured, launch_added, sweep

    output = Output.pop(kw)
    req = topology_from(kw)
    run = read_nccl_tests(measured, op) if measured else None
    if gpus is None and req.gpus_per_node is None and req.platform is None and run is not None \
            and run.ranks and not (req.nodes is None and req.nccl_log is not None):
        gpus = run.ranks  # the ranks it measured (one node of them unless --nodes says)
    model, notices = checked_topology(req, gpus)
    for text in notices:
        notice(text)
    if run is not None:
        check_measured(run, op, model)
    if sizes is None:
        sizes = sorted({r.bytes for r in run.rows if r.bytes > 0}) if run is not None else \
            [8 << k for k in range(32)]
    elif run is not None:
        have = {r.bytes for r in run.rows}
        missing = [n for n in sizes if n not in have]
        if missing:
            shown = ", ".join(format_size(n) for n in missing[:6]) + (" ..." if len(missing) > 6 else "")
            notice(f"{measured} has no row at {len(missing)} of the {len(sizes)} sizes asked "
                   f"({shown}): no measurement there")
    launch = launch_added(model, run)
    if launch > 0:
        notice(f"{measured} was run by one thread driving {run.gpus_per_thread} GPUs (nccl-tests "
               f"-g {run.gpus_per_thread}), which launches their kernels one after another: each "
               f"prediction compared with it adds {launch:.1f} us (fitted on such tables); one "
               "process per GPU, as DDP and FSDP run and plans assume, does not pay it")
    emit(CollectiveResult(op, model, sweep(model, op, sizes, run), measured,
                          run.gpus_per_thread if run is not None else None), output)
