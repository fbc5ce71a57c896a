"""``--strategy fsdp2`` and ``--strategy fsdp1``: the step FSDP runs with a configuration,
predicted: its collectives in issue order (exactly FSDP's, :mod:`.rules`), their times on
the schedule (:mod:`.timing`), the memory of parameters and gradients, and the code that
sets it up."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...costs import CostModel
from ...errors import PlanError
from ..base import PlanInput
from .details import Details, UnitRow
from .model import unit_sizes
from .options import setup_of
from .paste import fsdp1_paste, fsdp2_paste
from .rules import schedule_of
from .timing import fsdp_timeline, memory_of

__all__ = ["plan_fsdp", "applies_to", "fsdp_settings"]

TITLES = {"fsdp2": "PyTorch FSDP2", "fsdp1": "PyTorch FSDP1"}


def applies_to(system: str):
    """Whether a plan input is an FSDP run of ``system`` (the strategies plan those)."""
    return lambda inp: inp.fsdp is not None and inp.fsdp.system == system


def plan_fsdp(system: str, inp: PlanInput, options, cost: CostModel):
    """The plan of ``inp``'s FSDP run under ``options`` on ``cost.gpus`` ranks."""
    from ..plan import BucketPlan

    f = inp.fsdp
    if f is None:
        raise PlanError(f"--strategy {system} plans a PyTorch FSDP run, and this trace has no "
                        "FSDP labels: profile the FSDP run itself (record_shapes=True)")
    if f.system != system:
        raise PlanError(f"the trace is a {TITLES[f.system]} run: plan it with --strategy "
                        f"{f.system}")
    setup = setup_of(f, options, cost.gpus)
    sched = schedule_of(setup)
    members = {u.name: u.gradients for u in setup.units}
    timeline, times = fsdp_timeline(setup, sched, cost, members, inp.update_ms)
    sizes = {u.name: unit_sizes(u, setup.shard, setup.run_shard) for u in setup.units}
    memory = memory_of(setup, sched, sizes)
    rows = tuple(UnitRow(u.name, u.members, len(u.params), sizes[u.name][0], sizes[u.name][1],
                         setup.param_dtype, setup.reduce_dtype, setup.reshard.get(u.name),
                         setup.explicit_forward.get(u.name), setup.explicit_backward.get(u.name),
                         u.deferred) for u in setup.units)
    paste = (fsdp2_paste(setup, f.param_dtype, f.reduce_dtype) if system == "fsdp2"
             else fsdp1_paste(setup))
    details = Details(system, cost.gpus, setup.shard, setup.replicate, rows, memory,
                      {k: v for k, v in options.to_json().items() if v not in ("", None, 0)},
                      tuple(paste))
    notes = _notes(setup, options, f)
    plan = BucketPlan(system, options, cost, inp, timeline, times.compute_ms, {}, notes,
                      fsdp=details)
    return replace(plan, settings=fsdp_settings(plan))


def fsdp_settings(plan) -> dict[str, Any]:
    """What to set: the plan's FSDP code, whole lines."""
    d = plan.fsdp
    return {"framework": f"pytorch-{d.system}", "text": "\n".join(d.paste)}


def _notes(setup, options, f) -> tuple[str, ...]:
    notes = []
    if setup.shard != f.shard:
        notes.append(f"planned on a shard group of {setup.shard}; the run's was {f.shard}: "
                     "units' padding recomputed from their parameters' shapes")
    budget = getattr(options, "memory_gib", None)
    if budget is not None:
        notes.append(f"memory budget {budget:g} GiB per GPU (parameters and gradients only)")
    return tuple(notes)
