"""``tracecli export``: the trace graph for other tools."""

from __future__ import annotations

import click

from ..analysis.observed import with_carried_by
from ..errors import TraceCliError
from .results import ExportResult, RunExportResult, TraceExportResult
from .group import cli
from .inputs import load_run, load_trace, run_paths, trace_args
from .options import load_options, trace_argument
from .output import Output, emit, force_option, notice


@cli.command()
@trace_argument
@load_options
@click.option("--to", "to", type=click.Choice(["graphml", "json", "chrome"]), required=True,
              help="GraphML, or networkx node-link JSON; chrome (Chrome/Perfetto): for a run, "
              "every rank's timeline on one clock (one process per rank); for one trace, the "
              "timeline it recorded (its ops on their host threads, its collectives on their "
              "streams).")
@click.option("-o", "--output", "out", required=True, metavar="FILE",
              help="Where to write ('-' for stdout).")
@force_option("FILE if it exists")
@click.pass_context
def export(ctx, trace, fmt, sizes, step, to, **kw):
    """Write the trace graph for other tools (GraphML or node-link JSON), or the recorded
    timeline of a run (its ranks aligned) or of one trace (--to chrome)."""
    output = Output.pop(kw, out_option="-o")
    path, fmt, sizes, step, _ = trace_args(ctx, trace, fmt, sizes, step, "exporting")
    output.claim(path, sizes)
    if to == "chrome":
        if run_paths(path) is None:
            _trace_timeline(path, fmt, sizes, step, output)
            return
        emit(RunExportResult(load_run(path, fmt, sizes, step)), output)
        return
    emit(ExportResult(with_carried_by(load_trace(path, fmt, sizes, step)), to), output)


def _trace_timeline(path, fmt, sizes, step, output: Output) -> None:
    """One trace's recorded timeline, and a notice saying that this is what was written."""
    from ..render.trace_chrome import trace_chrome_trace

    timeline = trace_chrome_trace(load_trace(path, fmt, sizes, step))
    if timeline is None:
        raise TraceCliError("the trace recorded no times, so it has no timeline to draw "
                            "(--to chrome writes a recorded one); tracecli plan-buckets TRACE "
                            "--chrome-trace FILE draws a plan's predicted timeline", path=path)
    emit(TraceExportResult(timeline.doc), output)
    notice(f"{timeline.summary}; tracecli plan-buckets --chrome-trace draws a plan's predicted "
           "timeline instead")
