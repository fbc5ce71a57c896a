"""``tracecli calibrate``: measure this machine's all-reduce (the cost model)."""

from __future__ import annotations

import click

from .. import launch
from ..results import CalibrationResult
from .group import cli
from .inputs import silent_rank
from .options import launch_from, launch_options, ranks_option
from .output import Output, emit, force_option, json_option, notice, out_option, progress_bar
from .types import POSITIVE_SIZE


@cli.command()
@ranks_option
@launch_options
@click.option("--min-size", type=POSITIVE_SIZE, default="4KiB", show_default=True,
              help="Smallest all-reduce, bytes.")
@click.option("--max-size", type=POSITIVE_SIZE, default="256MiB", show_default=True,
              help="Largest all-reduce, bytes.")
@click.option("--points", type=click.IntRange(2, 1000), default=12, show_default=True,
              help="Sizes, log-spaced between --min-size and --max-size.")
@click.option("--warmup", type=click.IntRange(0, 100_000), default=3, show_default=True,
              help="Untimed runs per size.")
@click.option("--iters", type=click.IntRange(1, 100_000), default=10, show_default=True,
              help="Timed runs per size.")
@json_option("Print the profile as JSON.")
@out_option("PROFILE.json", "Write the profile plan-buckets reads with --calibration.")
@force_option("--out")
def calibrate(min_size, max_size, points, warmup, iters, **kw):
    """Measure this machine's all-reduce latency and bandwidth (the cost model)."""
    from ..replay import CalibrationJob, Sweep, run_calibration

    if max_size < min_size:
        raise click.BadParameter("must not be below --min-size", param_hint="--max-size")
    output = Output.pop(kw)
    output.claim()
    asked = launch_from(kw)
    quiet = silent_rank()
    job = CalibrationJob(Sweep(min_size, max_size, points, warmup, iters))
    ready, backend_notice = launch.calibration_launch(job, asked, kw["oversubscribe"])
    if not quiet:
        notice(backend_notice)
    with progress_bar(not output.as_json and not quiet) as progress:
        report = run_calibration(job, ready, progress)
    if report is not None:  # None: a torchrun rank other than 0
        emit(CalibrationResult(report), output)
