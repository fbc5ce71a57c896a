"""The plan a profiled run used (``--strategy observed``), with the times it measured.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Union

from ..analysis import readiness
from ..analysis.compute import ComputeProfile
from ..analysis.observed import ObservedRun, observed_run
from ..analysis.readiness import Readiness
from ..errors import PlanError
from ..model import Trace
from ..costs import AlphaBeta, CostModel
from ..planning import STRATEGIES, PlanInput
from ..planning.observed import RunBucket, as_run_plan
from ..planning.base import Grad
from ..planning.inputs import plan_input
from ..planning.fsdp.observed import fsdp_as_run_plan
from .compute import ComputeRequest, profile_for, update_for
from .cost import CostRequest, resolve_cost
from .planned import Planned


__all__ = ["as_run", "cost_for", "from_run"]


def cost_for(trace: Trace, cost: Union[CostModel, CostRequest]) -> tuple[CostModel, list[str]]:
    return resolve_cost(trace, cost) if isinstance(cost, CostRequest) else (cost, [])


def as_run(trace: Trace, compute: ComputeRequest, cost: Union[CostModel, CostRequest]) -> Planned:
    """The plan the traced run used (``--strategy observed``), measured: always on the
    run's own ranks (another count would be a prediction, which the strategies make)."""
    world = trace.step.world_size if trace.step is not None else None
    asked = cost.gpus if isinstance(cost, CostRequest) else None
    if world and isinstance(cost, CostRequest) and asked not in (None, world):
        cost = replace(cost, gpus=world)
    model, notices = cost_for(trace, cost)
    if world and model.gpus != world:
        model = model.on(world)
    if asked not in (None, world):
        notices.insert(0, f"--gpus {asked} ignored: the observed plan is what the run measured"
                       + (f" on its {world} ranks" if world else "") + f"; for {asked} GPUs, "
                       f"predict it: --compare --gpus {asked} (its 'as run (model)' row)")
    ready = readiness(trace)
    profile = profile_for(trace, ready, compute)
    if trace.meta.fsdp is not None:  # FSDP's own collectives: all-gathers, reduce-scatters
        inp = plan_input(trace, ready, profile, update_for(compute, profile))
        plan = fsdp_as_run_plan(inp, model)
        return Planned(trace, ready, profile, inp, model, plan, notices=tuple(notices), as_run=plan)
    run = observed_run(trace, ready)
    if not run.buckets:
        raise PlanError("no as-run plan: " + "; ".join(
            run.problems or ("the trace records no gradient all-reduce",)), path=trace.path)
    if any(b.collective.start_ms is None for b in run.buckets):
        raise PlanError("the trace does not record when its all-reduces ran; " + (
            "its run had one rank, whose all-reduces move nothing (no kernel or transfer to "
            "time): an as-run plan needs a run of 2 or more ranks" if world == 1 else
            "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"),
            path=trace.path)
    update = update_for(compute, profile)
    if all(g.nbytes is not None for g in ready.gradients):
        inp = plan_input(trace, ready, profile, update)
        members = _by_ddp(trace, ready, inp, run) if any(b.members is None for b in run.buckets) \
            else None
        if members is not None:
            run = run._replace(buckets=tuple(b._replace(members=m, note=None)
                                             for b, m in zip(run.buckets, members)), problems=())
        buckets = [_measured(b, inp, b.members or ()) for b in run.buckets]
    else:
        inp, buckets = _bucket_level(trace, ready, profile, run, update)
    plan = as_run_plan(inp, buckets, model, run.problems)
    return Planned(trace, ready, profile, inp, model, plan, notices=tuple(notices), as_run=plan)


def _by_ddp(trace: Trace, ready: Readiness, inp: PlanInput, run: ObservedRun):
    """The members of the run's buckets by DDP's own rule where its mode keeps parameters
    without a gradient in them (``find_unused_parameters``, ``static_graph``), which the
    matching by ready gradients cannot see: the buckets ``ddp`` plans in that mode, if they
    are exactly the run's, in order and bytes; else ``None``."""
    from ..planning.plan import make_plan
    from .ddp_run import ddp_setup, with_mode

    inp, mode = ddp_setup(trace, ready, inp)
    if mode is None or not inp.params:
        return None
    options, _ = with_mode({}, mode)
    sizes = [b.collective.nbytes for b in run.buckets]
    for cap in (None, *sorted({n for n in sizes if n})):  # the defaults, else a cap DDP had
        plan = make_plan(inp, "ddp", {**options, "max_bytes": cap}, AlphaBeta("-", 0.0, 1.0, 2))
        if [b.nbytes for b in plan.buckets] == sizes:
            return [b.members for b in plan.buckets]
    return None


def _measured(b, inp: PlanInput, members: tuple[int, ...]) -> RunBucket:
    c = b.collective
    nbytes = c.nbytes if c.nbytes is not None else sum(inp.grads[i].nbytes for i in members)
    dtype = c.dtype or (inp.grads[members[0]].dtype if members else "float32")
    return RunBucket(members, nbytes, dtype, c.launch_ms, c.start_ms, c.end_ms, c.kind)


def _bucket_level(trace: Trace, ready: Readiness, profile: ComputeProfile, run: ObservedRun,
                  update: float) -> tuple[PlanInput, list[RunBucket]]:
    """Without gradient sizes: one planning unit per as-run bucket (its all-reduce's size)."""
    grads, buckets, counts = [], [], []
    for k, b in enumerate(run.buckets):
        c = b.collective
        if c.nbytes is None or not b.members:
            raise PlanError("the trace records neither gradient shapes nor "
                            "all-reduce sizes; " + trace.abilities.sizes_hint, path=trace.path)
        first, last = ready.gradients[b.members[0]], ready.gradients[b.members[-1]]
        at = max(profile.ready_at(ready.gradients[i].backward_position) for i in b.members)
        label = f"bucket{k}({len(b.members)} grads: {first.name}..{last.name})"
        grads.append(Grad(label, c.nbytes, c.dtype or "float32", c.elements, at, k))
        counts.append(len(b.members))
        buckets.append(RunBucket((k,), c.nbytes, c.dtype or "float32", c.launch_ms,
                                 c.start_ms, c.end_ms, c.kind))
    source = profile.source + "; gradients grouped by the run's buckets (sizes per gradient unknown)"
    inp = PlanInput(tuple(grads), profile.forward_ms, profile.backward_end_ms, update, source,
                    unit_gradients=tuple(counts))
    return inp, buckets


def from_run(strategy: str) -> bool:
    """True for a strategy taken from the traced run (its spec says), not predicted."""
    spec = STRATEGIES.get(strategy)
    return spec is not None and spec.from_run
