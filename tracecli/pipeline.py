"""The whole chain for one request: trace -> readiness -> compute times -> plan.

The CLI and replay call this; each step stays a pure function in its own package. What
the user should hear about (a fallback, an ignored option) comes back as ``notices``;
the library never prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Union

from .analysis import SizeReport, readiness, size_report
from .analysis.compute import ComputeProfile, compute_profile
from .parsers.op_times import load_op_times
from .analysis.observed import ObservedRun, measured_allreduces, observed_run
from .analysis.readiness import Readiness
from .analysis.shapes import infer_shapes
from .errors import CalibrationError, CostModelError, PlanError
from .model import ComputeSource, Trace
from .costs import DEFAULT_NETWORK, CostModel, fit_ring, fitted_model, monotone, read_profile
from .costs import resolve_cost_model, trimmed_mean
from .costs.nccl.request import TopologyRequest, nccl_cost_model
from .planning import STRATEGIES, PlanInput, StrategyOptions, compare, make_plan
from .planning.asrun import RunBucket, as_run_plan, as_run_prediction, run_messages
from .planning.base import FixedPlan, Grad
from .planning.inputs import left_out_notice, plan_input
from .planning.plan import BucketPlan, CompareRow

__all__ = ["ComputeRequest", "CostRequest", "Planned", "plan_trace", "compare_trace",
           "prepare", "inputs", "gradient_details", "replay_job", "resolve_cost", "trace_cost",
           "as_run", "replay_inputs", "DEFAULT_GPUS", "DEFAULT_NETWORK", "Inspected",
           "inspect_trace"]

DEFAULT_GPUS = 8



@dataclass(frozen=True)
class ComputeRequest:
    device: str = "h100"
    op_times: Optional[str] = None
    backward_ms: Optional[float] = None
    forward_ms: Optional[float] = None
    update_ms: Optional[float] = None  # None: the trace's optimizer step, else 0


@dataclass(frozen=True)
class CostRequest:
    """What the user asked of the cost model; ``gpus=None`` takes the calibration's or the
    trace's rank count, else 8."""

    gpus: Optional[int] = None
    network: Optional[str] = None
    algorithm: str = "ring"
    alpha_us: Optional[float] = None
    bandwidth_gbps: Optional[float] = None
    launch_us: float = 0.0
    calibration: Optional[str] = None
    topology: Optional[TopologyRequest] = None  # given: NCCL's model of this topology
    nccl_tests: Optional[str] = None  # nccl-tests output measured on it

    @property
    def explicit(self) -> bool:
        """True when it names an interconnect (profile, preset, overrides or a topology)."""
        return any(v is not None for v in (self.calibration, self.network, self.alpha_us,
                                           self.bandwidth_gbps, self.topology, self.nccl_tests))

    def model(self, default_gpus: int = DEFAULT_GPUS) -> CostModel:
        return resolve_cost(None, self, default_gpus)[0]


def trace_cost(trace: Trace, gpus: int, algorithm: str = "ring",
               launch_us: float = 0.0) -> tuple[Optional[CostModel], Optional[str]]:
    """alpha-beta fitted to the gradient all-reduces the trace measured, or why not."""
    points, ranks, backend = measured_allreduces(trace)
    if not points:
        return None, None
    sizes = sorted({n for n, _ in points})
    if ranks is None or ranks < 2:
        return None, ("the trace does not say how many ranks its all-reduces spanned; "
                      "cannot fit the cost model to them")
    if len(sizes) < 2:
        return None, (f"the trace's {len(points)} gradient all-reduces have {len(sizes)} "
                      "distinct size: too few to fit latency and bandwidth")
    try:
        fit = fit_ring(points, ranks)
    except CalibrationError as exc:
        return None, f"cannot fit the trace's all-reduces: {exc.message}"
    source = (f"fitted to {len(points)} gradient all-reduces in the trace ({len(sizes)} sizes, "
              f"{ranks} ranks{', ' + backend if backend else ''}): R²={fit.r2:.4f}, "
              f"MAPE {fit.mape_pct:.1f}%")
    quality = {"r2": fit.r2, "mape_pct": fit.mape_pct, "points": len(points), "sizes": len(sizes),
               "ranks": ranks, "poor": fit.poor}
    poor = None
    if fit.poor:
        poor = (f"the alpha-beta fit to the trace's all-reduces is poor (R²={fit.r2:.2f}, MAPE "
                f"{fit.mape_pct:.0f}%): recorded times include waiting for the slowest rank, so "
                "predictions are rough; tracecli calibrate measures this machine cleanly")
    by_size: dict[int, list[float]] = {}
    for n, ms in points:
        by_size.setdefault(n, []).append(ms)
    measured = monotone((n, trimmed_mean(times)) for n, times in by_size.items())
    if gpus == ranks:
        source += "; the run's own times per size where it measured them"
    else:
        source += (f"; used on {gpus} ranks: the ring formula fitted on {ranks} ranks "
                   "extrapolates, the run's own times do not apply")
    return fitted_model("trace", fit, gpus, source, measured, ranks, algorithm=algorithm, launch_us=launch_us,
                        quality=quality), poor


def resolve_cost(trace: Optional[Trace], request: CostRequest,
                 default_gpus: int = DEFAULT_GPUS) -> tuple[CostModel, list[str]]:
    """The cost model for ``request``: a calibration profile, a preset or overrides when
    given; else fitted to the trace's own all-reduces when it has them; else the default
    preset. Returns it with the notices the user should see."""
    if request.topology is not None or request.nccl_tests is not None:
        return nccl_cost_model(request.topology or TopologyRequest(), request.gpus,
                               request.nccl_tests, request.calibration)
    notices: list[str] = []
    if request.calibration is not None and request.network is not None:
        raise PlanError("pass --calibration or --network, not both")
    profile = read_profile(request.calibration) if request.calibration else None
    gpus = request.gpus
    if gpus is None:
        if profile is not None:
            gpus = profile.gpus
        elif trace is not None and trace.step is not None and trace.step.world_size:
            gpus = trace.step.world_size
        else:
            gpus = default_gpus
    elif profile is not None and profile.gpus != gpus:
        notices.append(f"{request.calibration} was measured on {profile.gpus} ranks; predicting "
                       f"{gpus} ranks from its latency and bandwidth")
    if not request.explicit and trace is not None:
        model, why = trace_cost(trace, gpus, request.algorithm, request.launch_us)
        if model is not None:
            ranks = model.describe()["measured_on_gpus"]
            if ranks != gpus:
                notices.append(f"the trace's all-reduces ran on {ranks} ranks; predicting "
                               f"{gpus} ranks extrapolates the line fitted to them (pass "
                               f"--calibration measured on {gpus} ranks to rely on it)")
            return model, notices + ([why] if why else [])
        if why:
            notices.append(why + f"; using the {DEFAULT_NETWORK} preset (pass --network or "
                           "--calibration)")
    model = resolve_cost_model(gpus, request.network, request.alpha_us, request.bandwidth_gbps,
                               request.calibration, request.algorithm, request.launch_us,
                               profile=profile)
    return model, notices


@dataclass(frozen=True)
class Planned:
    trace: Trace
    ready: Readiness
    profile: ComputeProfile
    inp: PlanInput
    cost: CostModel
    plan: Optional[BucketPlan] = None
    rows: list[CompareRow] = field(default_factory=list)
    notices: tuple[str, ...] = ()
    as_run: Optional[BucketPlan] = None  # what the traced run did, measured

    def backward_names(self) -> list[tuple[str, float]]:
        """(op name, ms) of the backward ops in execution order, for timelines."""
        return [(self.trace.op(op_id).name, ms) for op_id, ms in self.profile.backward]


def _profile(trace: Trace, ready: Readiness, compute: ComputeRequest) -> ComputeProfile:
    times = load_op_times(compute.op_times) if compute.op_times else None
    return compute_profile(trace, ready, compute.device, times, compute.backward_ms,
                           compute.forward_ms)


def _update(compute: ComputeRequest, profile: ComputeProfile) -> float:
    if compute.update_ms is not None:
        return compute.update_ms
    return profile.update_ms or 0.0


def inputs(trace: Trace, compute: ComputeRequest) -> tuple[Readiness, ComputeProfile, PlanInput]:
    """Readiness, compute profile and the planner's input for ``trace``."""
    ready = readiness(trace)
    profile = _profile(trace, ready, compute)
    return ready, profile, plan_input(trace, ready, profile, _update(compute, profile))


def _cost(trace: Trace, cost: Union[CostModel, CostRequest]) -> tuple[CostModel, list[str]]:
    return resolve_cost(trace, cost) if isinstance(cost, CostRequest) else (cost, [])


def prepare(trace: Trace, compute: ComputeRequest, cost: Union[CostModel, CostRequest]) -> Planned:
    model, notices = _cost(trace, cost)
    ready, profile, inp = inputs(trace, compute)
    left_out = left_out_notice(inp)
    return Planned(trace, ready, profile, inp, model,
                   notices=tuple(notices) + ((left_out,) if left_out else ()))


def as_run(trace: Trace, compute: ComputeRequest, cost: Union[CostModel, CostRequest]) -> Planned:
    """The plan the traced run used (``--strategy observed``), measured: always on the
    run's own ranks (another count would be a prediction, which the strategies make)."""
    world = trace.step.world_size if trace.step is not None else None
    asked = cost.gpus if isinstance(cost, CostRequest) else None
    if world and isinstance(cost, CostRequest) and asked not in (None, world):
        cost = replace(cost, gpus=world)
    model, notices = _cost(trace, cost)
    if world and model.gpus != world:
        model = model.on(world)
    if asked not in (None, world):
        notices.insert(0, f"--gpus {asked} ignored: the observed plan is what the run measured"
                       + (f" on its {world} ranks" if world else "") + f"; for {asked} GPUs, "
                       f"predict it: --compare --gpus {asked} (its 'as run (model)' row)")
    ready = readiness(trace)
    profile = _profile(trace, ready, compute)
    run = observed_run(trace, ready)
    if not run.buckets:
        raise PlanError("no as-run plan: " + "; ".join(
            run.problems or ("the trace records no gradient all-reduce",)), path=trace.path)
    if any(b.collective.start_ms is None for b in run.buckets):
        raise PlanError("the trace does not record when its all-reduces ran; "
                        "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]", path=trace.path)
    update = _update(compute, profile)
    if all(g.nbytes is not None for g in ready.gradients):
        inp = plan_input(trace, ready, profile, update)
        buckets = [_measured(b, inp, b.members or ()) for b in run.buckets]
    else:
        inp, buckets = _bucket_level(trace, ready, profile, run, update)
    plan = as_run_plan(inp, buckets, model, run.problems)
    return Planned(trace, ready, profile, inp, model, plan, notices=tuple(notices), as_run=plan)


def _measured(b, inp: PlanInput, members: tuple[int, ...]) -> RunBucket:
    c = b.collective
    nbytes = c.nbytes if c.nbytes is not None else sum(inp.grads[i].nbytes for i in members)
    dtype = c.dtype or (inp.grads[members[0]].dtype if members else "float32")
    return RunBucket(members, nbytes, dtype, c.launch_ms, c.start_ms, c.end_ms, c.kind)


def _bucket_level(trace: Trace, ready: Readiness, profile: ComputeProfile, run: ObservedRun,
                  update: float) -> tuple[PlanInput, list[RunBucket]]:
    """Without gradient sizes: one planning unit per as-run bucket (its all-reduce's size)."""
    times = profile.ready_times()
    grads, buckets, counts = [], [], []
    for k, b in enumerate(run.buckets):
        c = b.collective
        if c.nbytes is None or not b.members:
            raise PlanError("the trace records neither gradient shapes nor "
                            "all-reduce sizes; " + trace.abilities.sizes_hint, path=trace.path)
        first, last = ready.gradients[b.members[0]], ready.gradients[b.members[-1]]
        at = max(times[min(ready.gradients[i].backward_position, len(times) - 1)] for i in b.members)
        label = f"bucket{k}({len(b.members)} grads: {first.name}..{last.name})"
        grads.append(Grad(label, c.nbytes, c.dtype or "float32", c.elements, at, k))
        counts.append(len(b.members))
        buckets.append(RunBucket((k,), c.nbytes, c.dtype or "float32", c.launch_ms,
                                 c.start_ms, c.end_ms, c.kind))
    source = profile.source + "; gradients grouped by the run's buckets (sizes per gradient unknown)"
    inp = PlanInput(tuple(grads), profile.forward_ms, profile.backward_end_ms, update, source,
                    unit_gradients=tuple(counts))
    return inp, buckets


def _from_run(strategy: str) -> bool:
    """True for a strategy taken from the traced run (its spec says), not predicted."""
    spec = STRATEGIES.get(strategy)
    return spec is not None and spec.from_run


def plan_trace(trace: Trace, strategy: str, options: StrategyOptions, compute: ComputeRequest,
               cost: Union[CostModel, CostRequest]) -> Planned:
    if _from_run(strategy):
        return as_run(trace, compute, cost)
    planned = prepare(trace, compute, cost)
    return replace(planned, plan=make_plan(planned.inp, strategy, options, planned.cost))


def compare_trace(trace: Trace, options: StrategyOptions, compute: ComputeRequest,
                  cost: Union[CostModel, CostRequest]) -> Planned:
    """Every strategy and each framework tuned, all under one model; on a trace that
    recorded its collectives, the run's own buckets under that model ("as run (model)",
    the reference of every gain) and, at the run's own world size only, as measured."""
    planned = prepare(trace, compute, cost)
    rows = compare(planned.inp, planned.cost, options)
    run = None
    if trace.collectives():
        try:
            run = as_run(trace, compute, CostRequest(planned.cost.gpus) if isinstance(
                cost, CostRequest) else planned.cost).plan
        except (PlanError, CostModelError) as exc:
            planned = replace(planned, notices=planned.notices + (f"no as-run row: {exc.message}",))
    front = []
    if run is not None and all(b.members for b in run.buckets) and run.inp == planned.inp:
        front.append(CompareRow("as run (model)", as_run_prediction(run, planned.cost)))
    if run is not None and run.cost.gpus == planned.cost.gpus:
        front.insert(0, CompareRow("as run (measured)", run))
    elif run is not None:
        planned = replace(planned, notices=planned.notices + (
            f"the run was measured on {run.cost.gpus} ranks: on {planned.cost.gpus} GPUs every "
            "row is a prediction, and the measurement is not compared",))
    rows = front + rows
    best = next(r for r in rows if not r.plan.measured and r.label != "as run (model)")
    return replace(planned, plan=best.plan, rows=rows,
                   as_run=run if run is not None and run.cost.gpus == planned.cost.gpus else None)


def gradient_details(trace: Trace, ready: Readiness, compute: ComputeRequest) -> tuple[dict, Optional[str]]:
    """Per gradient: its inferred shape and its ready time (ms) under the compute model.

    Returns ``({tensor id: {"shape", "ready_ms"}}, compute source or None)``. Traces without
    timings and without ``--backward-ms``/``--op-times`` have no ready times; that is not an
    error here.
    """
    shapes = infer_shapes(trace).shapes if trace.abilities.infers_shapes else {}
    try:
        profile = _profile(trace, ready, compute)
    except PlanError:
        if trace.abilities.compute is not ComputeSource.NONE:
            raise
        profile = None
    times = profile.ready_times() if profile else None
    details = {}
    for g in ready.gradients:
        shape = g.shape if g.shape is not None else shapes.get(g.tensor_id)
        details[g.tensor_id] = {
            "shape": list(shape) if shape is not None else None,
            "ready_ms": times[min(g.backward_position, len(times) - 1)] if times else None,
        }
    return details, profile.source if profile else None


def replay_inputs(trace: Trace, strategy: str, compute: ComputeRequest, world: int):
    """What a replay of ``trace`` plans from: the planner's input, and for a strategy taken
    from the run (``observed``) the run's own buckets as a fixed plan (else ``None``)."""
    if not _from_run(strategy):
        return inputs(trace, compute)[2], None
    plan = as_run(trace, compute, CostRequest(world)).plan
    if not all(b.members for b in plan.buckets):
        raise PlanError("the run's buckets are not all matched to its "
                        "gradients (see plan-buckets --strategy observed); cannot replay them", path=trace.path)
    messages = run_messages(plan)
    return plan.inp, FixedPlan(tuple(b.members for b in plan.buckets), plan.strategy,
                               tuple(b.collective for b in plan.buckets),
                               tuple(messages) if messages else None)


def replay_job(inp: PlanInput, strategy: str, options: StrategyOptions, cost: CostRequest,
               iters: int, warmup: int, fixed=None, baseline: bool = False):
    """The replay of ``inp``. Its prediction uses ``cost`` when that names an interconnect
    (calibration profile, network preset or overrides); otherwise the ranks calibrate in
    place first, over sizes up to everything in one bucket."""
    from .replay.jobs import ReplayJob, Sweep

    model = cost.model() if cost.explicit else None
    return ReplayJob(inp, strategy, options, model,
                     model.source if model else "in-place calibration", iters, warmup, fixed,
                     sweep=Sweep.covering(sum(g.nbytes for g in inp.grads)), baseline=baseline)


@dataclass(frozen=True)
class Inspected:
    """What ``inspect`` reports of a trace: readiness, sizes, and per gradient its shape and
    ready time (``details``, with the compute model's ``source``)."""

    trace: Trace
    ready: Readiness
    sizes: SizeReport
    details: dict
    source: Optional[str]


def inspect_trace(trace: Trace, compute: ComputeRequest) -> Inspected:
    ready = readiness(trace)
    sizes = size_report(trace, ready)
    details, source = gradient_details(trace, ready, compute)
    return Inspected(trace, ready, sizes, details, source)

