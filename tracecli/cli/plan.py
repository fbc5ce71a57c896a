"""``tracecli plan-buckets``: group gradients into buckets and predict the step."""

from __future__ import annotations

import click

from ..pipeline import compare_trace, plan_trace
from .results import CompareResult, PlanResult
from ..run import analyze_run
from ..pipeline.runs import compare_run, plan_run
from .group import cli
from .inputs import load_trace, run_paths, session, trace_args
from .options import compute_from, compute_options, cost_from, cost_options, load_options, \
    trace_argument
from .output import Output, chrome_trace_option, emit, force_option, json_option, notice, \
    out_option, top_option
from .progress import progress_bar
from .strategy import STRATEGY_KEYS, strategy_from, strategy_options


@cli.command("plan-buckets")
@trace_argument
@load_options
@strategy_options
@cost_options
@compute_options
@click.option("--compare", "do_compare", is_flag=True,
              help="Every strategy side by side, and each framework's best settings.")
@top_option()
@json_option("Print the plan as JSON (docs/json.md).")
@out_option("PLAN.json", "Write the plan file replay reads with --plan.")
@chrome_trace_option("Write a Chrome/Perfetto timeline.")
@force_option()
@click.pass_context
def plan_buckets(ctx, trace, fmt, sizes, step, do_compare, **kw):
    """Group gradients into all-reduce buckets and predict the step's timeline.

    With no TRACE, plans the trace remembered by tracecli inspect, and remembers the plan it
    prints for tracecli replay (as it does for TRACE when that is the remembered trace).
    Only tracecli inspect changes which trace is remembered.
    """
    output = Output.pop(kw)
    path, fmt, sizes, step, remembered = trace_args(ctx, trace, fmt, sizes, step, "planning")
    output.claim(path, sizes, kw["op_times"], kw["calibration"], kw["nccl_tests"],
                 kw["nccl_log"])
    if do_compare and output.chrome_trace:
        notice("--compare --chrome-trace writes the timeline of the best predicted plan only")
    strategy, compute, cost = strategy_from(kw), compute_from(kw), cost_from(kw)
    paths = run_paths(path)
    if paths is not None:  # a run: the lowest rank's step, its collectives by transfer time
        with progress_bar(True) as progress:
            report = analyze_run(paths, progress=progress)
        t = load_trace(report.run.ranks[0].path, fmt, sizes, step, quiet=output.as_json)
        if do_compare:
            result = CompareResult(compare_run(t, report, strategy, compute, cost))
        else:
            result = PlanResult(plan_run(t, report, kw["strategy"], strategy, compute, cost))
    else:
        t = load_trace(path, fmt, sizes, step, quiet=output.as_json)
        if do_compare:
            result = CompareResult(compare_trace(t, strategy, compute, cost))
        else:
            result = PlanResult(plan_trace(t, kw["strategy"], strategy, compute, cost))
    for text in result.planned.notices:
        notice(text)
    emit(result, output)
    s = session(ctx)
    if remembered or s.is_remembered(path):
        notice(s.remember_plan(result.plan.strategy, {k: kw[k] for k in STRATEGY_KEYS},
                               result.plan_text) or s.save())
