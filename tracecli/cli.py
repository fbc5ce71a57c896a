"""The command line: parse options, call the library, hand results to ``render``.

Every :class:`~tracecli.errors.TraceCliError` becomes one line on stderr and exit status 2,
in one place (:class:`_Group`); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Optional

import click
from rich.console import Console

from . import __version__
from .analysis import readiness, size_report
from .analysis.compute import DEVICES
from .errors import PlanError, TraceCliError
from .parsers import FORMATS, LoadOptions, load
from .pipeline import (
    DEFAULT_GPUS, ComputeRequest, CostRequest, as_run, compare_trace, gradient_details, inputs,
    plan_trace, replay_job,
)
from .planning import NETWORKS, STRATEGIES, StrategyOptions
from .planning.asrun import AS_RUN
from .planning.costmodel import ALGORITHMS
from .render import jsonout, plans, tables
from .units import parse_size

__all__ = ["cli"]


class _Group(click.Group):
    """Turns errors into one line: the user's (exit 2), interrupts (130), our bugs (1)."""

    def invoke(self, ctx: click.Context):
        def debug() -> bool:  # set by the group's callback, before any subcommand runs
            return bool(ctx.obj and ctx.obj.get("debug"))

        try:
            return super().invoke(ctx)
        except TraceCliError as exc:
            if debug():
                raise
            click.secho(f"tracecli: {exc}" if not exc.path else str(exc), fg="red", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.secho("tracecli: interrupted", fg="red", err=True)
            ctx.exit(130)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: one line, traceback with --debug
            if debug():
                raise
            click.secho(f"tracecli: internal error: {type(exc).__name__}: {exc}; rerun with "
                        "--debug for the traceback and please report it", fg="red", err=True)
            ctx.exit(1)


def console() -> Console:
    """stdout console: colour only on a terminal; 140 columns into pipes and files
    (unless COLUMNS says otherwise), the terminal's width on one."""
    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(highlight=False, soft_wrap=False, width=140)
    return out


def write_output(path: str, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` (``-`` is stdout), refusing to overwrite without --force."""
    if path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path)
    if target.exists() and not force:
        raise TraceCliError(path, None, "exists; pass --force to overwrite it")
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TraceCliError(path, None, f"cannot write: {exc.strerror}") from None


trace_argument = click.argument("trace", metavar="TRACE")


class SizeType(click.ParamType):
    """Byte sizes: 32k, 25MiB, 64MB, 1048576."""

    name = "SIZE"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SIZE = SizeType()


def options(*decorators):
    def apply(func):
        for decorator in reversed(decorators):
            func = decorator(func)
        return func
    return apply


compute_options = options(
    click.option("--device", type=click.Choice(list(DEVICES)), default="h100", show_default=True,
                 help="Device preset for estimated op times (Chainer dumps)."),
    click.option("--op-times", metavar="FILE",
                 help='Measured times, JSON: {OP_OR_LAYER: ms, ..., "forward_ms": ms}.'),
    click.option("--backward-ms", type=click.FloatRange(min=0), help="Measured backward time "
                 "(required for op lists without --op-times; rescales estimates)."),
    click.option("--forward-ms", type=click.FloatRange(min=0), help="Measured forward time."),
    click.option("--update-ms", type=click.FloatRange(min=0),
                 help="Optimizer update time after the last all-reduce, ms (default: the "
                 "trace's optimizer step where it records one, else 0)."),
)

def gpus_option(default: int, help: str):
    return click.option("--gpus", type=click.IntRange(min=1), default=default, show_default=True,
                        help=help)


network_options = options(
    click.option("--network", type=click.Choice(list(NETWORKS)),
                 help="Interconnect preset (default nvlink-h100)."),
    click.option("--algorithm", type=click.Choice(ALGORITHMS), default="ring", show_default=True),
    click.option("--alpha-us", type=click.FloatRange(min=0), help="Per-step latency override (us)."),
    click.option("--bandwidth-gbps", type=click.FloatRange(min=0, min_open=True),
                 help="Bus bandwidth override in GB/s (10^9 bytes/s, nccl-tests busbw)."),
    click.option("--launch-us", type=click.FloatRange(min=0), default=0.0,
                 help="Per-bucket launch overhead (us)."),
    click.option("--calibration", metavar="FILE", help="Cost model from tracecli calibrate --out."),
)
cost_options = options(
    click.option("--gpus", type=click.IntRange(min=1), help="Data-parallel ranks to plan for "
                 f"(default: the calibration's ranks, else the trace's world size, else "
                 f"{DEFAULT_GPUS})."),
    network_options)

strategy_options = options(
    click.option("--strategy", type=click.Choice(list(STRATEGIES) + [AS_RUN]), default="size",
                 show_default=True, help="How to group gradients into buckets (observed: the "
                 "buckets a profiled run used, with its measured times)."),
    click.option("--max-bytes", type=SIZE, help="Bucket cap (size, ddp: bucket_cap; horovod: "
                 "fusion threshold; optimal: optional cap). E.g. 32k, 25MiB."),
    click.option("--first-bucket-bytes", type=SIZE, help="ddp: first bucket cap (default as "
                 "torch: 1 MiB unless --max-bytes is given)."),
    click.option("--cycle-ms", type=click.FloatRange(min=0, min_open=True), default=1.0,
                 show_default=True, help="horovod: HOROVOD_CYCLE_TIME."),
    click.option("--spec", default="nccl", show_default=True,
                 help="tf-spec: tf_cnn_benchmarks --all_reduce_spec, e.g. pscpu:32k:xring."),
    click.option("--agg-small-grads-max-bytes", type=SIZE, default=0,
                 help="tf-spec: pack float32 gradients up to this size."),
    click.option("--agg-small-grads-max-group", type=click.IntRange(min=0), default=10,
                 show_default=True, help="tf-spec: longest packed range - 2."),
)


def strategy_from(kw) -> StrategyOptions:
    return StrategyOptions(kw["max_bytes"], kw["first_bucket_bytes"], kw["cycle_ms"], kw["spec"],
                           kw["agg_small_grads_max_bytes"], kw["agg_small_grads_max_group"])


def compute_from(kw) -> ComputeRequest:
    return ComputeRequest(kw["device"], kw["op_times"], kw["backward_ms"], kw["forward_ms"],
                          kw["update_ms"])


def cost_from(kw) -> CostRequest:
    return CostRequest(kw["gpus"], kw["network"], kw["algorithm"], kw["alpha_us"],
                       kw["bandwidth_gbps"], kw["launch_us"], kw["calibration"])


def load_options(func):
    func = click.option("--step", type=click.IntRange(min=0), metavar="K",
                        help="Profiler traces: use ProfilerStep#K (default: the last step with "
                        "a backward pass).")(func)
    func = click.option("--sizes", "sizes", metavar="FILE",
                        help="Sizes sidecar: shapes for a TensorFlow op list, parameter names "
                        "for a profiler trace (default: TRACE.sizes.json beside the trace).")(func)
    func = click.option("--format", "fmt", type=click.Choice(FORMATS),
                        help="Trace format (default: detected from the content).")(func)
    return func


BIG_TRACE_BYTES = 8 * 1024 * 1024  # a progress bar for traces that take seconds to parse


def _load(trace: str, fmt: Optional[str], sizes: Optional[str], step: Optional[int] = None,
          quiet: bool = False):
    try:
        big = trace != "-" and os.path.getsize(trace) >= BIG_TRACE_BYTES
    except OSError:
        big = False  # load() says what is wrong with the path
    with progress_bar(big and not quiet) as progress:
        return load(trace, LoadOptions(format=fmt, sizes=sizes, step=step, progress=progress))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracecli")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Gradient readiness, all-reduce bucket plans and their replay, from one step's trace."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@cli.command()
@trace_argument
@load_options
@click.option("--top", type=click.IntRange(min=1), help="Show only the first N rows of tables.")
@click.option("--per-gradient", is_flag=True, help="One readiness row per gradient, not per layer.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document (DESIGN 5).")
@compute_options
def inspect(trace, fmt, sizes, step, top, per_gradient, as_json, **kw):
    """What is in a step: ops, tensors, parameters, readiness order, sizes."""
    t = _load(trace, fmt, sizes, step, quiet=as_json)
    ready = readiness(t)
    report = size_report(t, ready)
    details, source = gradient_details(t, ready, compute_from(kw))
    if as_json:
        doc = jsonout.inspect_doc(t, ready, report, details)
        doc["readiness"]["compute_source"] = source
        click.echo(jsonout.dumps(doc), nl=False)
        return
    console().print(tables.inspect_view(t, ready, report, top=top, per_gradient=per_gradient,
                                        details=details, compute_source=source))


@cli.command()
@trace_argument
@load_options
@click.option("--to", "to", type=click.Choice(["graphml", "json"]), required=True,
              help="GraphML, or networkx node-link JSON.")
@click.option("-o", "--output", "output", required=True, metavar="FILE",
              help="Where to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
def export(trace, fmt, sizes, step, to, output, force):
    """Write the trace graph for other tools (GraphML or node-link JSON)."""
    t = _load(trace, fmt, sizes, step)
    if to == "json":
        text = jsonout.dumps(t.node_link())
    else:
        buffer = io.BytesIO()
        t.write_graphml(buffer)
        text = buffer.getvalue().decode("utf-8")
    write_output(output, text, force)


@cli.command("plan-buckets")
@trace_argument
@load_options
@strategy_options
@cost_options
@compute_options
@click.option("--compare", "do_compare", is_flag=True,
              help="Every strategy side by side, and each framework's best settings.")
@click.option("--top", type=click.IntRange(min=1), help="Show only the first N buckets.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (DESIGN 5).")
@click.option("--out", metavar="PLAN.json", help="Write the plan file replay reads with --plan.")
@click.option("--chrome-trace", metavar="FILE", help="Write a Chrome/Perfetto timeline.")
@click.option("--force", is_flag=True, help="Overwrite --out / --chrome-trace files.")
def plan_buckets(trace, fmt, sizes, step, do_compare, top, as_json, out, chrome_trace, force, **kw):
    """Group gradients into all-reduce buckets and predict the step's timeline."""
    t = _load(trace, fmt, sizes, step, quiet=as_json)
    strategy = strategy_from(kw)
    cost = cost_from(kw)
    if do_compare:
        planned = compare_trace(t, strategy, compute_from(kw), cost)
    else:
        planned = plan_trace(t, kw["strategy"], strategy, compute_from(kw), cost)
    for notice in planned.notices:
        _notice(notice)
    plan = planned.plan
    doc = jsonout.plan_doc(plan)
    if out:
        write_output(out, jsonout.dumps(doc), force)
    if chrome_trace:
        write_output(chrome_trace, jsonout.dumps(
            plans.plan_chrome_trace(plan, planned.backward_names())), force)
    if as_json:
        click.echo(jsonout.dumps(jsonout.compare_doc(planned.rows) if do_compare else doc), nl=False)
    elif do_compare:
        console().print(plans.compare_view(planned.rows, plan))
    else:
        console().print(plans.plan_view(plan, top))


@contextlib.contextmanager
def progress_bar(enabled: bool):
    """A rich progress bar on stderr when it is a terminal; a no-op callback otherwise."""
    err = Console(stderr=True)
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        yield update


def _fault(text: Optional[str]):
    if not text:
        return None
    from .replay import FAULT_MODES, Fault

    rank, _, mode = text.partition(":")
    if not rank.isdigit() or mode not in FAULT_MODES:
        raise click.BadParameter(f"expected RANK:MODE with MODE one of {', '.join(FAULT_MODES)}",
                                 param_hint="--inject-fault")
    return Fault(int(rank), mode)


def _notice(text: Optional[str]) -> None:
    if text:
        click.secho(f"tracecli: {text}", fg="yellow", err=True)


launch_options = options(
    click.option("--backend", type=click.Choice(["auto", "nccl", "gloo"]), default="auto",
                 show_default=True, help="auto: NCCL when --gpus CUDA devices are visible, else gloo."),
    click.option("--timeout", type=click.FloatRange(min=1), default=30.0, show_default=True,
                 help="Collective timeout (s); a hung or dead rank stops all ranks within it."),
    click.option("--inject-fault", hidden=True, metavar="RANK:MODE",
                 help="Testing: make RANK raise, exit or hang."),
)


@cli.command()
@click.argument("trace", required=False, metavar="[TRACE]")
@load_options
@strategy_options
@gpus_option(2, "Ranks to start (ignored under torchrun, which sets the world).")
@network_options
@compute_options
@launch_options
@click.option("--plan", "plan_file", metavar="PLAN.json", help="Replay a plan file instead of planning TRACE.")
@click.option("--iters", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--baseline", is_flag=True, help="Also time a bare all-reduce of each bucket "
              "(the replay's own overhead).")
@click.option("--top", type=click.IntRange(min=1), help="Show only the first N buckets.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (DESIGN 5).")
@click.option("--out", metavar="FILE", help="Write the JSON report to FILE.")
@click.option("--chrome-trace", metavar="FILE", help="Predicted and measured tracks side by side.")
@click.option("--force", is_flag=True, help="Overwrite --out / --chrome-trace files.")
def replay(trace, fmt, sizes, step, plan_file, iters, warmup, baseline, top, as_json, out,
           chrome_trace, force, **kw):
    """Run the plan with real all-reduces on real ranks and compare with the prediction."""
    from .replay import FixedPlan, Launch, run_replay
    from .replay.launcher import in_torchrun, resolve_backend

    launch = Launch(kw["gpus"], kw["backend"], kw["timeout"], _fault(kw["inject_fault"]))
    world = int(os.environ["WORLD_SIZE"]) if in_torchrun() else launch.gpus
    quiet = in_torchrun() and os.environ.get("RANK") != "0"
    fixed = None
    if plan_file:
        from .planning.planfile import load_plan_file

        inp, buckets, doc = load_plan_file(plan_file)
        fixed = FixedPlan(tuple(buckets), str(doc["strategy"]))
    elif trace is None:
        raise click.UsageError("pass TRACE, or --plan PLAN.json")
    else:
        t = _load(trace, fmt, sizes, step, quiet=as_json or quiet)
        if kw["strategy"] == AS_RUN:
            plan = as_run(t, compute_from(kw), CostRequest(world)).plan
            if not all(b.members for b in plan.buckets):
                raise PlanError(t.path, None, "the run's buckets are not all matched to its "
                                "gradients (see plan-buckets --strategy observed); cannot replay them")
            inp = plan.inp
            fixed = FixedPlan(tuple(b.members for b in plan.buckets), AS_RUN)
        else:
            _, _, inp = inputs(t, compute_from(kw))
    cost = CostRequest(world, kw["network"], kw["algorithm"], kw["alpha_us"], kw["bandwidth_gbps"],
                       kw["launch_us"], kw["calibration"])
    job = replay_job(inp, kw["strategy"], strategy_from(kw), cost, iters, warmup, fixed, baseline)
    backend, notice = resolve_backend(launch)
    if not quiet:
        _notice(notice)
    with progress_bar(not as_json and not quiet) as progress:
        doc = run_replay(job, Launch(world, backend, launch.timeout_s, launch.fault), progress)
    if doc is None:  # a torchrun rank other than 0
        return
    if out:
        write_output(out, jsonout.dumps(doc), force)
    if chrome_trace:
        from .render.replay import replay_chrome_trace

        write_output(chrome_trace, jsonout.dumps(replay_chrome_trace(doc)), force)
    if as_json:
        click.echo(jsonout.dumps(doc), nl=False)
    else:
        from .render.replay import replay_view

        console().print(replay_view(doc, top))
    if not doc["replay"]["verified"]:
        raise TraceCliError(None, None, "reduced buffers do not hold the expected sums")


@cli.command()
@gpus_option(2, "Ranks to start (ignored under torchrun).")
@launch_options
@click.option("--min-size", type=SIZE, default="4KiB", show_default=True)
@click.option("--max-size", type=SIZE, default="256MiB", show_default=True)
@click.option("--points", type=click.IntRange(min=2), default=12, show_default=True,
              help="Sizes, log-spaced between --min-size and --max-size.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--iters", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@click.option("--out", metavar="PROFILE.json", help="Write the profile plan-buckets reads with --calibration.")
@click.option("--force", is_flag=True, help="Overwrite --out.")
def calibrate(min_size, max_size, points, warmup, iters, as_json, out, force, **kw):
    """Measure this machine's all-reduce latency and bandwidth (the cost model)."""
    from .replay import CalibrationJob, Launch, Sweep, run_calibration
    from .replay.launcher import in_torchrun, resolve_backend

    if max_size < min_size:
        raise click.BadParameter("must not be below --min-size", param_hint="--max-size")
    launch = Launch(kw["gpus"], kw["backend"], kw["timeout"], _fault(kw["inject_fault"]))
    quiet = in_torchrun() and os.environ.get("RANK") != "0"
    world = int(os.environ["WORLD_SIZE"]) if in_torchrun() else launch.gpus
    if world < 2:
        raise click.BadParameter("calibration needs at least 2 ranks", param_hint="--gpus")
    backend, notice = resolve_backend(launch)
    if not quiet:
        _notice(notice)
    job = CalibrationJob(Sweep(min_size, max_size, points, warmup, iters))
    with progress_bar(not as_json and not quiet) as progress:
        doc = run_calibration(job, Launch(world, backend, launch.timeout_s, launch.fault), progress)
    if doc is None:
        return
    if out:
        write_output(out, jsonout.dumps(doc), force)
    if as_json:
        click.echo(jsonout.dumps(doc), nl=False)
    else:
        from .render.replay import calibration_view

        console().print(calibration_view(doc))


def main() -> None:  # pragma: no cover - console entry point
    cli(prog_name="tracecli")
