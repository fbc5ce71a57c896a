"""``tracecli inspect``: what is in a step."""

from __future__ import annotations

import click

from ..pipeline import inspect_trace
from .results import InspectResult, RunResult
from .group import cli
from .inputs import load_run, load_trace, remember, run_paths, trace_args
from .options import compute_from, compute_options, load_options, trace_argument
from .output import Output, emit, json_option, top_option


@cli.command()
@trace_argument
@load_options
@top_option("rows of tables", "row")
@click.option("--per-gradient", is_flag=True, help="One readiness row per gradient, not per layer.")
@json_option("Print the JSON document (docs/json.md).")
@compute_options
@click.pass_context
def inspect(ctx, trace, fmt, sizes, step, per_gradient, **kw):
    """What is in a step: ops, tensors, parameters, readiness order, sizes.

    Given a run (a directory of per-rank traces, or several rank files): the straggler
    report, each collective's wait and transfer on every rank, and the ranks' clock offsets.

    Remembers TRACE in ./.tracecli/ for plan-buckets and replay; with no TRACE, inspects the
    remembered one.
    """
    output = Output.pop(kw)
    path, fmt, sizes, step, remembered = trace_args(ctx, trace, fmt, sizes, step, "inspecting")
    if run_paths(path) is not None:
        report = load_run(path, fmt, sizes, step)
        if not remembered:
            remember(ctx, path, fmt, sizes, step)
        emit(RunResult(report), output)
        return
    t = load_trace(path, fmt, sizes, step, quiet=output.as_json)
    inspected = inspect_trace(t, compute_from(kw))
    if not remembered:
        remember(ctx, path, fmt, sizes, step)
    emit(InspectResult(inspected, per_gradient), output)
