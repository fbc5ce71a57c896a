"""Replaying a plan or calibrating: what a replay of a trace plans from, its job, on which
ranks with which backend (checked first), and the report, refused when its buffers do not
verify.

The steps the CLI calls between parsing and printing; torch is imported only inside
:mod:`tracecli.replay`, when ranks start.
"""

from __future__ import annotations

import os
from typing import Optional

from ..costs import DEFAULT_NETWORK, CostModel, resolve_cost_model
from ..errors import PlanError, ReplayError
from ..limits import MAX_RANKS
from ..model import Trace
from ..planning import OptionValues, PlanInput, options_for
from ..planning.base import FixedPlan
from ..planning.observed import run_messages
from .compute import ComputeRequest, inputs
from .cost import CostRequest
from .observed import as_run, from_run

__all__ = ["world_size", "in_torchrun", "plan_file_inputs", "replay_ranks", "calibration_ranks",
           "dry_run_cost", "verified_replay", "drift_notice", "replay_inputs", "replay_job"]

DRIFT_NOTICE_PCT = 2.0  # say so when the emulated compute ran further than this off the plan
SPIN_NOTICE_PCT = 5.0  # or the spin clock further than this off its calibration


def in_torchrun() -> bool:
    from ..replay.processes import in_torchrun as under

    return under()


def world_size(gpus: int) -> int:
    """The ranks a replay on ``gpus`` GPUs runs on: torchrun's world under torchrun, else ``gpus``."""
    from ..replay.processes import in_torchrun

    if not in_torchrun():
        return gpus
    text = os.environ["WORLD_SIZE"]
    if not text.isdigit() or not 1 <= int(text) <= MAX_RANKS:
        raise ReplayError(f"WORLD_SIZE={text[:20]!r} is not a rank count; torchrun "
                          "sets it: run under torchrun or unset RANK, WORLD_SIZE, MASTER_ADDR")
    return int(text)


def plan_file_inputs(path: str):
    """A replay of the plan file at ``path``: the planner's input, the plan, fixed, and the
    strategy's options it was made with."""
    from ..planning.planfile import load_plan_file

    saved = load_plan_file(path)
    return saved.inp, saved.fixed, saved.options


def _ranks(ranks, oversubscribe: bool):
    from ..replay.jobs import Ranks
    from ..replay.processes import check_capacity, in_torchrun, resolve_backend

    world = world_size(ranks.gpus)
    backend, notice = resolve_backend(ranks)
    if not in_torchrun():
        check_capacity(world, backend, oversubscribe)
    return Ranks(world, backend, ranks.timeout_s, ranks.fault), notice


def replay_ranks(job, ranks, oversubscribe: bool = False, plan_file: Optional[str] = None):
    """``ranks`` as it runs ``job`` (torchrun's world, the backend resolved), checked against
    this machine's capacity and memory; with the notice on the backend chosen, if any."""
    from ..replay.validate import check_job

    ready, notice = _ranks(ranks, oversubscribe)
    check_job(job, ready.gpus, ready.backend, plan_file)
    return ready, notice


def calibration_ranks(job, ranks, oversubscribe: bool = False):
    """As :func:`replay_ranks`, for a calibration sweep."""
    from ..replay.validate import check_sweep

    ready, notice = _ranks(ranks, oversubscribe)
    check_sweep(job.sweep, ready.gpus, ready.backend)
    return ready, notice


def dry_run_cost(job, world: int) -> tuple[CostModel, Optional[str]]:
    """The cost model a dry run predicts ``job`` with, and a notice when it is a stand-in for
    the in-place calibration the replay would run."""
    if job.cost is not None:
        return job.cost, None
    return resolve_cost_model(world, DEFAULT_NETWORK), (
        f"dry run: the replay calibrates in place first; predicted here with the "
        f"{DEFAULT_NETWORK} preset (pass --network or --calibration)")


def verified_replay(job, ranks, progress=None):
    """Replay ``job``: its report (``None`` on torchrun ranks other than 0), refused when a
    reduced buffer does not hold the expected sum."""
    from ..replay import run_replay

    report = run_replay(job, ranks, progress)
    if report is not None and not report.verified:
        raise ReplayError("reduced buffers do not hold the expected sums; nothing "
                          "written")
    return report


def drift_notice(report) -> Optional[str]:
    """A notice when the replay's compute ran off the plan (a late host, an overslept wait)
    or the GPU's spin clock drifted from its calibration (the spin is rescaled every step;
    exposed communication is measured against the compute as it ran)."""
    m, r = report.measured, report.replay
    said = []
    if m.compute_drift_pct is not None and abs(m.compute_drift_pct) >= DRIFT_NOTICE_PCT:
        said.append(f"the emulated compute took {m.compute_ms:.3f} ms, {m.compute_drift_pct:+.1f}% "
                    f"off the plan's {report.plan.timeline.compute_ms:.3f} ms (exposed "
                    "communication is measured against the compute as it ran)")
    if r.spin_drift_pct is not None and abs(r.spin_drift_pct) >= SPIN_NOTICE_PCT:
        said.append(f"the GPU's spin clock ran {r.spin_drift_pct:+.1f}% off its calibration "
                    "(the spin was rescaled every step)")
    return "; ".join(said) or None


def replay_inputs(trace: Trace, strategy: str, compute: ComputeRequest, world: int):
    """What a replay of ``trace`` plans from: the planner's input, and for a strategy taken
    from the run (``observed``) the run's own buckets as a fixed plan (else ``None``)."""
    if not from_run(strategy):
        return inputs(trace, compute)[2], None
    fsdp = trace.meta.fsdp
    if fsdp is not None:  # its as-run schedule is FSDP's with the run's own knobs
        raise PlanError(f"replay the {fsdp.system} run's own schedule with --strategy "
                        f"{fsdp.system} (its knobs default to the run's); --strategy "
                        "observed replays all-reduce buckets", path=trace.path)
    plan = as_run(trace, compute, CostRequest(world)).plan
    if not all(b.members for b in plan.buckets):
        raise PlanError("the run's buckets are not all matched to its "
                        "gradients (see plan-buckets --strategy observed); cannot replay them", path=trace.path)
    messages = run_messages(plan)
    return plan.inp, FixedPlan(tuple(b.members for b in plan.buckets), plan.strategy,
                               tuple(b.collective for b in plan.buckets),
                               tuple(messages) if messages else None)


def replay_job(inp: PlanInput, strategy: str, options: OptionValues, cost: CostRequest,
               iters: int, warmup: int, fixed=None, baseline: bool = False):
    """The replay of ``inp``. Its prediction uses ``cost`` when that names an interconnect
    (calibration profile, network preset or overrides); otherwise the ranks calibrate in
    place first, over sizes up to everything in one bucket."""
    from ..replay.jobs import ReplayJob, Sweep

    model = cost.model() if cost.explicit else None
    return ReplayJob(inp, strategy, options_for(strategy, options), model,
                     model.source if model else "in-place calibration", iters, warmup, fixed,
                     sweep=Sweep.covering(sum(g.nbytes for g in inp.grads)), baseline=baseline)
