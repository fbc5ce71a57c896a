"""``tracecli replay``: run a plan with real all-reduces on real ranks."""

from __future__ import annotations

from dataclasses import replace

import click

from ..pipeline import replay as replaying
from ..pipeline.replay import replay_inputs, replay_job
from ..planning.inputs import left_out_notice
from ..replay.jobs import ReplayJob
from .results import DryRunResult, ReplayResult
from .session import STATE_DIR
from .group import cli
from .inputs import given, load_trace, say_notices, session, silent_rank, trace_args
from .options import compute_from, compute_options, cost_from, ranks_from, process_options, \
    load_options, network_options, ranks_option, topology_from
from .output import Output, chrome_trace_option, emit, force_option, json_option, notice, \
    out_option, top_option
from .progress import progress_bar
from .strategy import STRATEGY_KEYS, strategy_from, strategy_options


@cli.command()
@click.argument("trace", required=False, metavar="[TRACE]")
@load_options
@strategy_options
@ranks_option
@network_options
@compute_options
@process_options
@click.option("--plan", "plan_file", metavar="PLAN.json", help="Replay a plan file instead of "
              "planning TRACE.")
@click.option("--iters", type=click.IntRange(1, 100_000), default=ReplayJob.iters, show_default=True,
              help="Timed iterations.")
@click.option("--warmup", type=click.IntRange(0, 100_000), default=ReplayJob.warmup, show_default=True,
              help="Untimed iterations first.")
@click.option("--baseline", is_flag=True, help="Also time a bare all-reduce of each bucket "
              "(the replay's own overhead).")
@click.option("--dry-run", is_flag=True, help="Check everything and show the plan that would be "
              "replayed, with its prediction; start no rank.")
@top_option()
@json_option("Print the report as JSON (docs/json.md).")
@out_option("FILE", "Write the JSON report to FILE.")
@chrome_trace_option("Predicted and measured tracks side by side.")
@force_option()
@click.pass_context
def replay(ctx, trace, fmt, sizes, step, plan_file, iters, warmup, baseline, dry_run, **kw):
    """Run the plan with real all-reduces on real ranks and compare with the prediction.

    With neither TRACE nor --plan, replays the plan remembered by tracecli plan-buckets, or
    plans the remembered trace.
    """
    output = Output.pop(kw)
    asked = ranks_from(kw)
    if (topology_from(kw).given or kw["nccl_tests"]) and not given(ctx, "gpus") \
            and not replaying.in_torchrun():
        asked = replace(asked, gpus=cost_from({**kw, "gpus": None}).model().gpus)  # its ranks
    world = replaying.world_size(asked.gpus)
    quiet = silent_rank()
    say = (lambda text: None) if quiet else notice
    if trace is not None and plan_file:
        say(f"--plan {plan_file} is replayed; TRACE {trace} is ignored")
    if trace is None and plan_file is None and not any(given(ctx, k) for k in STRATEGY_KEYS):
        s = session(ctx)
        if s.trace is not None:
            s.remembered_trace()  # a changed trace makes the remembered plan stale
            say_notices(s)
        plan_file = s.remembered_plan()
        if plan_file:
            say(f"replaying the plan remembered by tracecli plan-buckets "
                f"({s.plan.get('strategy')}, {STATE_DIR}/plan.json)")
    output.claim(trace, sizes, plan_file, kw["op_times"], kw["calibration"], kw["nccl_tests"],
                 kw["nccl_log"])
    options = strategy_from(kw)
    if plan_file:
        inp, fixed, options = replaying.plan_file_inputs(plan_file)
    else:
        path, fmt, sizes, step, _ = trace_args(ctx, trace, fmt, sizes, step, "replaying")
        t = load_trace(path, fmt, sizes, step, quiet=output.as_json or quiet)
        inp, fixed = replay_inputs(t, kw["strategy"], compute_from(kw), world)
        say(left_out_notice(inp))
    job = replay_job(inp, kw["strategy"], options, cost_from(kw, world), iters, warmup, fixed,
                     baseline)
    ready, backend_notice = replaying.replay_ranks(job, asked, kw["oversubscribe"], plan_file)
    if dry_run:
        cost, cost_notice = replaying.dry_run_cost(job, world)
        say(cost_notice)
        result = DryRunResult(job.plan(cost), world, ready.backend, iters, warmup)
        emit(result, output)  # nothing ran: it has no --out or --chrome-trace to write
        return
    say(backend_notice)
    with progress_bar(not output.as_json and not quiet) as progress:
        report = replaying.verified_replay(job, ready, progress)
    if report is not None:  # None: a torchrun rank other than 0
        say(replaying.drift_notice(report))
        emit(ReplayResult(report), output)
