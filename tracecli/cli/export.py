"""``tracecli export``: the trace graph for other tools."""

from __future__ import annotations

import click

from ..analysis.observed import with_carried_by
from ..errors import TraceCliError
from .results import ExportResult, RunExportResult
from .group import cli
from .inputs import load_run, load_trace, run_paths, trace_args
from .options import load_options, trace_argument
from .output import Output, emit, force_option


@cli.command()
@trace_argument
@load_options
@click.option("--to", "to", type=click.Choice(["graphml", "json", "chrome"]), required=True,
              help="GraphML, or networkx node-link JSON; for a run, chrome: every rank's "
              "timeline on one clock (Chrome/Perfetto, one process per rank).")
@click.option("-o", "--output", "out", required=True, metavar="FILE",
              help="Where to write ('-' for stdout).")
@force_option("FILE if it exists")
@click.pass_context
def export(ctx, trace, fmt, sizes, step, to, **kw):
    """Write the trace graph for other tools (GraphML or node-link JSON), or a run's
    aligned timeline (--to chrome)."""
    output = Output.pop(kw, out_option="-o")
    path, fmt, sizes, step, _ = trace_args(ctx, trace, fmt, sizes, step, "exporting")
    output.claim(path, sizes)
    if to == "chrome":
        if run_paths(path) is None:
            raise TraceCliError("--to chrome writes a run's ranks on one timeline; "
                                "pass the run's directory or rank files (plan-buckets "
                                "--chrome-trace draws one trace's plan)")
        emit(RunExportResult(load_run(path, fmt, sizes, step)), output)
        return
    emit(ExportResult(with_carried_by(load_trace(path, fmt, sizes, step)), to), output)
