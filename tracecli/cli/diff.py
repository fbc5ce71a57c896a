"""``tracecli diff RUN_A RUN_B``: two runs side by side, and did the advice work."""

from __future__ import annotations

import click

from ..pipeline.runs import check_advice
from ..run import analyze_run
from ..run.diff import diff_runs
from .group import cli
from .inputs import load_trace
from .options import compute_from, compute_options, cost_from, cost_options
from .output import Output, emit, json_option
from .progress import progress_bar
from .results import DiffResult


@cli.command()
@click.argument("before", metavar="RUN_A")
@click.argument("after", metavar="RUN_B")
@click.option("--plan", "plan", metavar="PLAN.json", help="The plan file RUN_B was made with "
              "(plan-buckets RUN_A --out PLAN.json): its predicted gain beside the measured one.")
@json_option("Print the JSON document (see docs/runs.md).")
@cost_options
@compute_options
def diff(before, after, plan, **kw):
    """Two runs side by side: step, compute, exposed communication, buckets, collectives and
    the ops that changed most, each against the runs' own noise.

    RUN_A and RUN_B are each a run's directory of per-rank traces, or one trace. With
    --plan, says whether the advice worked: the gain tracecli predicted for the plan RUN_B
    was made with (planned from RUN_A, under the same cost options) beside the gain
    measured.
    """
    output = Output.pop(kw)
    with progress_bar(True) as progress:
        a = analyze_run([before], progress=progress)
    with progress_bar(True) as progress:
        b = analyze_run([after], progress=progress)
    result = diff_runs(a, b)
    advice = None
    if plan is not None:
        trace = load_trace(a.run.ranks[0].path, None, None, quiet=True)
        advice = check_advice(plan, trace, a, b, result.change_of("step"), compute_from(kw),
                              cost_from(kw))
    emit(DiffResult(result, advice), output)
