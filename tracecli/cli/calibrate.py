"""``tracecli calibrate``: measure this machine's all-reduce (the cost model)."""

from __future__ import annotations

from dataclasses import replace

import click

from ..pipeline import replay as replaying
from ..replay.jobs import Sweep
from ..units import size_text
from .results import CalibrationResult
from .group import cli
from .inputs import silent_rank
from .inputs import given
from .options import checked_topology, gpu_option, ranks_from, process_options, ranks_option, topology_from, \
    topology_options
from .output import Output, emit, force_option, json_option, notice, out_option
from .progress import progress_bar
from .types import POSITIVE_SIZE


@cli.command()
@ranks_option
@process_options
@click.option("--min-size", type=POSITIVE_SIZE, default=size_text(Sweep.min_bytes), show_default=True,
              help="Smallest all-reduce, bytes.")
@click.option("--max-size", type=POSITIVE_SIZE, default=size_text(Sweep.max_bytes), show_default=True,
              help="Largest all-reduce, bytes.")
@click.option("--points", type=click.IntRange(2, 1000), default=Sweep.points, show_default=True,
              help="Sizes, log-spaced between --min-size and --max-size.")
@click.option("--warmup", type=click.IntRange(0, 100_000), default=Sweep.warmup, show_default=True,
              help="Untimed runs per size.")
@click.option("--iters", type=click.IntRange(1, 100_000), default=Sweep.iters, show_default=True,
              help="Timed runs per size.")
@topology_options
@gpu_option
@json_option("Print the profile as JSON (with a topology: NCCL's model at each size too).")
@out_option("PROFILE.json", "Write the profile plan-buckets reads with --calibration.")
@force_option("--out")
@click.pass_context
def calibrate(ctx, min_size, max_size, points, warmup, iters, **kw):
    """Measure this machine's all-reduce latency and bandwidth (the cost model).

    With topology flags (--nodes, --platform, ...), NCCL's model of that topology is shown
    beside each measured size.
    """
    from ..replay import CalibrationJob, run_calibration

    if max_size < min_size:
        raise click.BadParameter("must not be below --min-size", param_hint="--max-size")
    output = Output.pop(kw)
    output.claim()
    asked = ranks_from(kw)
    nccl = None
    topology = topology_from(kw)
    if topology.given:
        nccl, said = checked_topology(topology, asked.gpus if given(ctx, "gpus") else
                                    replaying.world_size(asked.gpus) if replaying.in_torchrun() else None)
        if not given(ctx, "gpus") and not replaying.in_torchrun():
            asked = replace(asked, gpus=nccl.gpus)
        for text in said:
            notice(text)
    quiet = silent_rank()
    job = CalibrationJob(Sweep(min_size, max_size, points, warmup, iters))
    ready, backend_notice = replaying.calibration_ranks(job, asked, kw["oversubscribe"])
    if not quiet:
        notice(backend_notice)
    with progress_bar(not output.as_json and not quiet) as progress:
        report = run_calibration(job, ready, progress)
    if report is not None:  # None: a torchrun rank other than 0
        emit(CalibrationResult(report, nccl), output)
