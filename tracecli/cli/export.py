"""``tracecli export``: the trace graph for other tools."""

from __future__ import annotations

import click

from ..results import ExportResult
from .group import cli
from .inputs import load_trace, trace_args
from .options import load_options, trace_argument
from .output import Output, emit, force_option


@cli.command()
@trace_argument
@load_options
@click.option("--to", "to", type=click.Choice(["graphml", "json"]), required=True,
              help="GraphML, or networkx node-link JSON.")
@click.option("-o", "--output", "out", required=True, metavar="FILE",
              help="Where to write ('-' for stdout).")
@force_option("FILE if it exists")
@click.pass_context
def export(ctx, trace, fmt, sizes, step, to, **kw):
    """Write the trace graph for other tools (GraphML or node-link JSON)."""
    output = Output.pop(kw, out_option="-o")
    path, fmt, sizes, step, _ = trace_args(ctx, trace, fmt, sizes, step, "exporting")
    output.claim(path, sizes)
    emit(ExportResult(load_trace(path, fmt, sizes, step), to), output)
