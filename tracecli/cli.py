"""The command line: parse options, call the library, hand results to ``render``.

Every :class:`~tracecli.errors.TraceCliError` becomes one line on stderr and exit status 2,
in one place (:class:`_Group`); so does every usage error; ``--debug`` shows the traceback
instead. Ctrl-C exits 130. Outputs are claimed before the work and written after it
(:mod:`tracecli.outfile`); the session in ``.tracecli/`` fills in what was left out
(:mod:`tracecli.session`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from typing import TYPE_CHECKING, Optional

import click
from click.core import ParameterSource

from . import __version__
from ._gc import gc_paused
from .analysis import readiness, size_report
from .analysis.compute import DEVICES
from .errors import TraceCliError
from .outfile import Outputs
from .parsers import FORMATS, LoadOptions, load
from .pipeline import (
    DEFAULT_GPUS, ComputeRequest, CostRequest, compare_trace, gradient_details, plan_trace,
    replay_inputs, replay_job,
)
from .costs import ALGORITHMS, NETWORKS
from .planning import KNOBS, STRATEGIES, Kind, Knob, StrategyOptions
from .render import jsonout
from .session import STATE_DIR, Session
from .units import parse_size

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["cli"]


class _Group(click.Group):
    """Turns errors into one line: the user's (exit 2), interrupts (130), our bugs (1)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            if not standalone_mode:
                return status
            sys.exit(status if isinstance(status, int) else 0)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:  # usage errors: one line, with the valid choices
            where = f"tracecli {exc.ctx.info_name}" if getattr(exc, "ctx", None) and \
                exc.ctx.info_name != "tracecli" else "tracecli"
            message = " ".join(exc.format_message().split())
            click.secho(f"{where}: {message} (--help shows the options)", fg="red", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.secho("tracecli: interrupted", fg="red", err=True)
            sys.exit(130)

    def invoke(self, ctx: click.Context):
        def debug() -> bool:  # set by the group's callback, before any subcommand runs
            return bool(ctx.obj and ctx.obj.get("debug"))

        try:
            with gc_paused():  # a short-lived process that builds no cycles: no collector passes
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
    (unless COLUMNS says otherwise), the terminal's width on one. (rich, its tables and
    the views are imported where they are used: JSON output never needs them.)"""
    from rich.console import Console

    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(highlight=False, soft_wrap=False, width=140)
    return out


def _machine(text: str) -> None:
    """JSON or GraphML on standard output byte for byte: click would otherwise scan tens of
    megabytes for terminal escapes to strip (JSON has none: it escapes control characters;
    any in exported data are data, not colours)."""
    click.echo(text, nl=False, color=True)


def _notice(text: Optional[str]) -> None:
    if text:
        click.secho(f"tracecli: {text}", fg="yellow", err=True)


def _lines(lines: list[str]) -> None:
    """Advice: whole lines, never cut or wrapped by a table."""
    click.echo("\n".join(lines))


class SizeType(click.ParamType):
    """Byte sizes: 32k, 25MiB, 64MB, 1048576 (at least ``minimum``)."""

    name = "SIZE"

    def __init__(self, minimum: int = 0):
        self.minimum = minimum

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            size = value
        else:
            try:
                size = parse_size(value)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        if size < self.minimum:
            self.fail(f"{value!r} is too small; give at least {self.minimum} byte"
                      + ("s" if self.minimum != 1 else ""), param, ctx)
        return size


class Number(click.ParamType):
    """A finite number in ``[low, high]`` (NaN and infinities are refused)."""

    name = "NUMBER"

    def __init__(self, low: float, high: float, unit: str, low_open: bool = False):
        self.low, self.high, self.unit, self.low_open = low, high, unit, low_open

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        below = x <= self.low if self.low_open else x < self.low
        if not math.isfinite(x) or below or x > self.high:
            lo = "(" if self.low_open else "["
            self.fail(f"{value!r} is not a finite number in {lo}{self.low:g}, {self.high:g}] "
                      f"{self.unit}", param, ctx)
        return x


SIZE = SizeType()
POSITIVE_SIZE = SizeType(minimum=1)
MS = Number(0.0, 1e7, "ms")
MAX_STEP_MS = 1e7  # ~2.8 hours: beyond any one training step


def options(*decorators):
    def apply(func):
        for decorator in reversed(decorators):
            func = decorator(func)
        return func
    return apply


compute_options = options(
    click.option("--device", type=click.Choice(list(DEVICES)), default="h100", show_default=True,
                 help="Device preset for estimated op times (traces with shapes but no timings)."),
    click.option("--op-times", metavar="FILE",
                 help='Measured times, JSON: {OP_OR_LAYER: ms, ..., "forward_ms": ms}.'),
    click.option("--backward-ms", type=MS, help="Measured backward time, ms (needed for op "
                 "lists without --op-times; rescales estimates). Default: none."),
    click.option("--forward-ms", type=MS, help="Measured forward time, ms (default: the trace's "
                 "or estimated, else half of backward)."),
    click.option("--update-ms", type=MS, help="Optimizer update time after the last all-reduce, "
                 "ms (default: the trace's optimizer step where it records one, else 0)."),
)

network_options = options(
    click.option("--network", type=click.Choice(list(NETWORKS)),
                 help="Interconnect preset (default: fitted to a profiler trace's own "
                 "all-reduces, else nvlink-h100)."),
    click.option("--algorithm", type=click.Choice(ALGORITHMS), default="ring", show_default=True,
                 help="All-reduce algorithm of the cost model."),
    click.option("--alpha-us", type=Number(0, 1e7, "us"),
                 help="Per-step latency override, us (default: the preset's)."),
    click.option("--bandwidth-gbps", type=Number(0, 1e6, "GB/s", low_open=True),
                 help="Bus bandwidth override, GB/s = 10^9 bytes/s as nccl-tests' busbw "
                 "(default: the preset's)."),
    click.option("--launch-us", type=Number(0, 1e7, "us"), default=0.0, show_default=True,
                 help="Per-bucket launch overhead, us."),
    click.option("--calibration", metavar="FILE", help="Cost model from tracecli calibrate --out "
                 "(its rank count becomes the default --gpus)."),
)
cost_options = options(
    click.option("--gpus", type=click.IntRange(1, 1 << 20), help="Data-parallel ranks to plan "
                 "for (default: the calibration's ranks, else the trace's world size, else "
                 f"{DEFAULT_GPUS})."),
    network_options)


def _knob_option(knob: Knob):
    """The click option of one strategy knob (the table: ``planning.KNOBS``)."""
    if knob.kind is Kind.FLAG:
        return click.option(knob.flag, is_flag=True, help=knob.help)
    types = {Kind.BYTES: POSITIVE_SIZE, Kind.BYTES_OR_ZERO: SIZE,
             Kind.MS: Number(0, 1e6, "ms", low_open=True), Kind.TEXT: None,
             Kind.COUNT: click.IntRange(min=0)}
    shown = {"default": knob.default, "show_default": True} if knob.default is not None else {}
    return click.option(knob.flag, type=types[knob.kind], help=knob.help, **shown)


strategy_options = options(
    click.option("--strategy", type=click.Choice(list(STRATEGIES)), default="size",
                 show_default=True, help="How to group gradients into buckets (observed: the "
                 "buckets a profiled run used, with its measured times)."),
    *(_knob_option(knob) for knob in KNOBS),
)

STRATEGY_KEYS = ("strategy", *(knob.name for knob in KNOBS))


def strategy_from(kw) -> StrategyOptions:
    return StrategyOptions(**{knob.name: kw[knob.name] for knob in KNOBS})


def compute_from(kw) -> ComputeRequest:
    return ComputeRequest(kw["device"], kw["op_times"], kw["backward_ms"], kw["forward_ms"],
                          kw["update_ms"])


def cost_from(kw, gpus: Optional[int] = None) -> CostRequest:
    return CostRequest(gpus if gpus is not None else kw["gpus"], kw["network"], kw["algorithm"],
                       kw["alpha_us"], kw["bandwidth_gbps"], kw["launch_us"], kw["calibration"])


def load_options(func):
    func = click.option("--step", type=click.IntRange(0, 1 << 62), metavar="K",
                        help="Profiler traces: use ProfilerStep#K (default: the last step with "
                        "a backward pass).")(func)
    func = click.option("--sizes", "sizes", metavar="FILE",
                        help="Sizes sidecar: shapes for a TensorFlow op list, parameter names "
                        "for a profiler trace (default: TRACE.sizes.json beside the trace).")(func)
    func = click.option("--format", "fmt", type=click.Choice(FORMATS),
                        help="Trace format (default: detected from the content).")(func)
    return func


BIG_TRACE_BYTES = 8 * 1024 * 1024  # a progress bar for traces that take seconds to parse


@contextlib.contextmanager
def progress_bar(enabled: bool):
    """A rich progress bar on stderr when it is a terminal; a no-op callback otherwise."""
    if not enabled:
        yield None
        return
    from rich.console import Console

    err = Console(stderr=True)
    if not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total or None)
            bar.update(tasks[stage], completed=done)

        yield update


def _load(trace: str, fmt: Optional[str], sizes: Optional[str], step: Optional[int] = None,
          quiet: bool = False):
    try:
        big = trace != "-" and os.path.getsize(trace) >= BIG_TRACE_BYTES
    except OSError:
        big = False  # load() says what is wrong with the path
    with progress_bar(big and not quiet) as progress:
        return load(trace, LoadOptions(format=fmt, sizes=sizes, step=step, progress=progress))


def _session(ctx: click.Context) -> Session:
    """This directory's session, loaded once; what loading it had to say is said at once."""
    obj = ctx.find_root().obj
    if "session" not in obj:
        obj["session"] = Session.load(".")
        _say_notices(obj["session"])
    return obj["session"]


def _silent_rank() -> bool:
    """Under torchrun, every rank runs the CLI; rank 0 speaks for all."""
    from .replay.launcher import in_torchrun

    return in_torchrun() and os.environ.get("RANK") != "0"


def _say_notices(session: Session) -> None:
    if not _silent_rank():
        for notice in session.notices:
            _notice(notice)
    session.notices.clear()


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP, None)


def _trace_args(ctx: click.Context, trace: Optional[str], fmt, sizes, step, what: str):
    """TRACE and how to read it: as given, else the session's remembered trace (explicit
    options still win), with a one-line notice saying so."""
    if trace is not None:
        return trace, fmt, sizes, step, False
    session = _session(ctx)
    remembered = session.remembered_trace()
    _say_notices(session)
    _notice(f"{what} the remembered trace {remembered.given} (from tracecli inspect; pass "
            "TRACE to choose another)")
    return (remembered.path, fmt or remembered.format, sizes or remembered.sizes,
            step if step is not None else remembered.step, True)


def _remember(ctx: click.Context, trace: str, fmt, sizes, step) -> None:
    if trace == "-":  # standard input cannot be read again
        return
    session = _session(ctx)
    try:
        session.remember_trace(trace, fmt, sizes, step)
    except OSError as exc:
        _notice(f"could not remember {trace}: {exc.strerror}")
        return
    _notice(session.save())


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"],
                                           "max_content_width": 100})
@click.version_option(__version__, prog_name="tracecli")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Gradient readiness, all-reduce bucket plans and their replay, from one step's trace.

    \b
    tracecli inspect trace.txt              # remembers the trace in this directory
    tracecli plan-buckets --max-bytes 32k   # plans the remembered trace
    tracecli replay --gpus 4                # replays the remembered plan on 4 ranks
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


trace_argument = click.argument("trace", required=False, metavar="[TRACE]")


@cli.command()
@trace_argument
@load_options
@click.option("--top", type=click.IntRange(min=1), help="Show the first N rows of tables "
              "(default: 1,000; --json has every row).")
@click.option("--per-gradient", is_flag=True, help="One readiness row per gradient, not per layer.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document (see the README).")
@compute_options
@click.pass_context
def inspect(ctx, trace, fmt, sizes, step, top, per_gradient, as_json, **kw):
    """What is in a step: ops, tensors, parameters, readiness order, sizes.

    Remembers TRACE in ./.tracecli/ for plan-buckets and replay; with no TRACE, inspects the
    remembered one.
    """
    path, fmt, sizes, step, remembered = _trace_args(ctx, trace, fmt, sizes, step, "inspecting")
    t = _load(path, fmt, sizes, step, quiet=as_json)
    ready = readiness(t)
    report = size_report(t, ready)
    details, source = gradient_details(t, ready, compute_from(kw))
    if not remembered:
        _remember(ctx, path, fmt, sizes, step)
    if as_json:
        _machine(jsonout.inspect_json(t, ready, report, details, source))
        return
    from .render import tables

    console().print(tables.inspect_view(t, ready, report, top=top, per_gradient=per_gradient,
                                        details=details, compute_source=source))


@cli.command()
@trace_argument
@load_options
@click.option("--to", "to", type=click.Choice(["graphml", "json"]), required=True,
              help="GraphML, or networkx node-link JSON.")
@click.option("-o", "--output", "output", required=True, metavar="FILE",
              help="Where to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Replace FILE if it exists (a symlink is replaced, "
              "not followed).")
@click.pass_context
def export(ctx, trace, fmt, sizes, step, to, output, force):
    """Write the trace graph for other tools (GraphML or node-link JSON)."""
    path, fmt, sizes, step, _ = _trace_args(ctx, trace, fmt, sizes, step, "exporting")
    outputs = Outputs(force, [path, sizes])
    outputs.claim("-o", output)
    t = _load(path, fmt, sizes, step)
    from .export import graphml_chunks, node_link_chunks

    _write(outputs, "-o", node_link_chunks(t) if to == "json" else graphml_chunks(t))


def _write(outputs: Outputs, option: str, text) -> None:
    """Write a claimed output (text or chunks of it): ``-`` here, a file atomically, then
    say what was written."""
    if outputs.path(option) == "-":
        for chunk in [text] if isinstance(text, str) else text:
            _machine(chunk)
        return
    _notice(f"wrote {outputs.write(option, text)}")


@cli.command("plan-buckets")
@trace_argument
@load_options
@strategy_options
@cost_options
@compute_options
@click.option("--compare", "do_compare", is_flag=True,
              help="Every strategy side by side, and each framework's best settings.")
@click.option("--top", type=click.IntRange(min=1), help="Show the first N buckets "
              "(default: 1,000; --json has every bucket).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (see the README).")
@click.option("--out", metavar="PLAN.json", help="Write the plan file replay reads with --plan.")
@click.option("--chrome-trace", metavar="FILE", help="Write a Chrome/Perfetto timeline.")
@click.option("--force", is_flag=True, help="Replace --out / --chrome-trace files (a symlink "
              "is replaced, not followed).")
@click.pass_context
def plan_buckets(ctx, trace, fmt, sizes, step, do_compare, top, as_json, out, chrome_trace, force,
                 **kw):
    """Group gradients into all-reduce buckets and predict the step's timeline.

    With no TRACE, plans the trace remembered by tracecli inspect. Remembers the plan it
    prints for tracecli replay.
    """
    path, fmt, sizes, step, remembered = _trace_args(ctx, trace, fmt, sizes, step, "planning")
    outputs = Outputs(force, [path, sizes, kw["op_times"], kw["calibration"]])
    outputs.claim("--out", out)
    outputs.claim("--chrome-trace", chrome_trace)
    if do_compare and chrome_trace:
        _notice("--compare --chrome-trace writes the timeline of the best predicted plan only")
    t = _load(path, fmt, sizes, step, quiet=as_json)
    strategy = strategy_from(kw)
    cost = cost_from(kw)
    if do_compare:
        planned = compare_trace(t, strategy, compute_from(kw), cost)
    else:
        planned = plan_trace(t, kw["strategy"], strategy, compute_from(kw), cost)
    for notice in planned.notices:
        _notice(notice)
    plan = planned.plan
    plan_text = jsonout.dumps(jsonout.plan_doc(plan))
    from .render import plans

    if as_json:
        _machine(jsonout.dumps(jsonout.compare_doc(planned.rows)) if do_compare else plan_text)
    elif do_compare:
        console().print(plans.compare_view(planned.rows, plan))
        _lines(plans.compare_advice(planned.rows))
    else:
        console().print(plans.plan_view(plan, top))
        _lines(plans.plan_advice(plan))
    if out:
        _write(outputs, "--out", plan_text)
    if chrome_trace:
        _write(outputs, "--chrome-trace", jsonout.dumps(
            plans.plan_chrome_trace(plan, planned.backward_names())))
    session = _session(ctx)
    if not remembered:
        try:
            session.remember_trace(path, fmt, sizes, step)
        except OSError:
            pass
    if path != "-":
        _notice(session.remember_plan(plan.strategy, {k: kw[k] for k in STRATEGY_KEYS}, plan_text)
                or session.save())


def _fault(text: Optional[str]):
    if not text:
        return None
    from .replay import FAULT_MODES, Fault

    rank, _, mode = text.partition(":")
    if not rank.isdigit() or len(rank) > 6 or mode not in FAULT_MODES:
        raise click.BadParameter(f"expected RANK:MODE with MODE one of {', '.join(FAULT_MODES)}",
                                 param_hint="--inject-fault")
    return Fault(int(rank), mode)


launch_options = options(
    click.option("--backend", type=click.Choice(["auto", "nccl", "gloo"]), default="auto",
                 show_default=True, help="auto: NCCL when --gpus CUDA devices are visible, else gloo."),
    click.option("--timeout", type=Number(1, 86400, "s"), default=30.0, show_default=True,
                 help="Collective timeout, s; a hung or dead rank stops all ranks within it."),
    click.option("--oversubscribe", is_flag=True, help="Start more CPU ranks than this machine "
                 "holds (two per core, within available memory) or more CUDA ranks than devices."),
    click.option("--inject-fault", hidden=True, metavar="RANK:MODE",
                 help="Testing: make RANK raise, exit or hang."),
)

ranks_option = click.option("--gpus", type=click.IntRange(2, 4096), default=2, show_default=True,
                            help="Ranks to start (ignored under torchrun, which sets the world).")


@cli.command()
@click.argument("trace", required=False, metavar="[TRACE]")
@load_options
@strategy_options
@ranks_option
@network_options
@compute_options
@launch_options
@click.option("--plan", "plan_file", metavar="PLAN.json", help="Replay a plan file instead of "
              "planning TRACE.")
@click.option("--iters", type=click.IntRange(1, 100_000), default=20, show_default=True,
              help="Timed iterations.")
@click.option("--warmup", type=click.IntRange(0, 100_000), default=3, show_default=True,
              help="Untimed iterations first.")
@click.option("--baseline", is_flag=True, help="Also time a bare all-reduce of each bucket "
              "(the replay's own overhead).")
@click.option("--dry-run", is_flag=True, help="Check everything and show the plan that would be "
              "replayed, with its prediction; start no rank.")
@click.option("--top", type=click.IntRange(min=1), help="Show the first N buckets "
              "(default: 1,000; --json has every bucket).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (see the README).")
@click.option("--out", metavar="FILE", help="Write the JSON report to FILE.")
@click.option("--chrome-trace", metavar="FILE", help="Predicted and measured tracks side by side.")
@click.option("--force", is_flag=True, help="Replace --out / --chrome-trace files (a symlink "
              "is replaced, not followed).")
@click.pass_context
def replay(ctx, trace, fmt, sizes, step, plan_file, iters, warmup, baseline, dry_run, top, as_json,
           out, chrome_trace, force, **kw):
    """Run the plan with real all-reduces on real ranks and compare with the prediction.

    With neither TRACE nor --plan, replays the plan remembered by tracecli plan-buckets, or
    plans the remembered trace.
    """
    from .replay import Launch, run_replay
    from .replay.launcher import check_capacity, in_torchrun, resolve_backend

    launch = Launch(kw["gpus"], kw["backend"], kw["timeout"], _fault(kw["inject_fault"]))
    world = int(os.environ["WORLD_SIZE"]) if in_torchrun() else launch.gpus
    quiet = _silent_rank()
    say = (lambda text: None) if quiet else _notice
    if trace is not None and plan_file:
        say(f"--plan {plan_file} is replayed; TRACE {trace} is ignored")
    strategy_given = any(_given(ctx, k) for k in STRATEGY_KEYS)
    if trace is None and plan_file is None and not strategy_given:
        session = _session(ctx)
        if session.trace is not None:
            session.remembered_trace()  # a changed trace makes the remembered plan stale
            _say_notices(session)
        plan_file = session.remembered_plan()
        if plan_file:
            say(f"replaying the plan remembered by tracecli plan-buckets "
                f"({session.plan.get('strategy')}, {STATE_DIR}/plan.json)")
    outputs = Outputs(force, [trace, sizes, plan_file, kw["op_times"], kw["calibration"]])
    outputs.claim("--out", out)
    outputs.claim("--chrome-trace", chrome_trace)
    fixed = None
    if plan_file:
        from .planning.planfile import load_plan_file

        saved = load_plan_file(plan_file)
        inp, fixed = saved.inp, saved.fixed
    else:
        path, fmt, sizes, step, _ = _trace_args(ctx, trace, fmt, sizes, step, "replaying")
        t = _load(path, fmt, sizes, step, quiet=as_json or quiet)
        inp, fixed = replay_inputs(t, kw["strategy"], compute_from(kw), world)
    job = replay_job(inp, kw["strategy"], strategy_from(kw), cost_from(kw, world), iters, warmup,
                     fixed, baseline)
    backend, notice = resolve_backend(launch)
    if not in_torchrun():
        check_capacity(world, backend, kw["oversubscribe"])
    from .replay.validate import check_job

    check_job(job, world, backend, plan_file)
    if dry_run:
        from .costs import resolve_cost_model

        cost = job.cost
        if cost is None:
            cost = resolve_cost_model(world, "nvlink-h100")
            say("dry run: the replay calibrates in place first; predicted here with the "
                "nvlink-h100 preset (pass --network or --calibration)")
        plan = job.plan(cost)
        if as_json:
            _machine(jsonout.dumps(plan.to_json()))
        else:
            from .render import plans

            console().print(plans.plan_view(plan, top))
            _lines([f"dry run: {world} ranks ({backend}) would replay {iters} iterations after "
                    f"{warmup} warm-up; nothing was started"])
        return
    say(notice)
    with progress_bar(not as_json and not quiet) as progress:
        result = run_replay(job, Launch(world, backend, launch.timeout_s, launch.fault), progress)
    if result is None:  # a torchrun rank other than 0
        return
    if not result.verified:
        raise TraceCliError(None, None, "reduced buffers do not hold the expected sums; nothing "
                            "written")
    report = jsonout.dumps(result.to_json())
    if as_json:
        _machine(report)
    else:
        from .render.replay import replay_view

        console().print(replay_view(result, top))
    if out:
        _write(outputs, "--out", report)
    if chrome_trace:
        from .render.replay import replay_chrome_trace

        _write(outputs, "--chrome-trace", jsonout.dumps(replay_chrome_trace(result)))


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
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@click.option("--out", metavar="PROFILE.json", help="Write the profile plan-buckets reads with "
              "--calibration.")
@click.option("--force", is_flag=True, help="Replace --out (a symlink is replaced, not followed).")
def calibrate(min_size, max_size, points, warmup, iters, as_json, out, force, **kw):
    """Measure this machine's all-reduce latency and bandwidth (the cost model)."""
    from .replay import CalibrationJob, Launch, Sweep, run_calibration
    from .replay.launcher import check_capacity, in_torchrun, resolve_backend

    if max_size < min_size:
        raise click.BadParameter("must not be below --min-size", param_hint="--max-size")
    outputs = Outputs(force)
    outputs.claim("--out", out)
    launch = Launch(kw["gpus"], kw["backend"], kw["timeout"], _fault(kw["inject_fault"]))
    quiet = _silent_rank()
    world = int(os.environ["WORLD_SIZE"]) if in_torchrun() else launch.gpus
    backend, notice = resolve_backend(launch)
    if not in_torchrun():
        check_capacity(world, backend, kw["oversubscribe"])
    job = CalibrationJob(Sweep(min_size, max_size, points, warmup, iters))
    from .replay.validate import check_sweep

    check_sweep(job.sweep, world, backend)
    if not quiet:
        _notice(notice)
    with progress_bar(not as_json and not quiet) as progress:
        profile = run_calibration(job, Launch(world, backend, launch.timeout_s, launch.fault),
                                  progress)
    if profile is None:
        return
    if as_json:
        _machine(jsonout.dumps(profile.to_json()))
    else:
        from .render.replay import calibration_view

        console().print(calibration_view(profile))
    if out:
        _write(outputs, "--out", jsonout.dumps(profile.to_json()))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the state as JSON.")
@click.pass_context
def status(ctx, as_json):
    """What this directory's session remembers (./.tracecli/; delete it to reset)."""
    session = _session(ctx)
    if as_json:
        _machine(jsonout.dumps(session.to_json()))
        return
    from .render.status import status_lines

    _lines(status_lines(session))


def main() -> None:  # pragma: no cover - console entry point
    cli(prog_name="tracecli")
