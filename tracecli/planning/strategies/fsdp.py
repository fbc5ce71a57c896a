"""``fsdp2`` and ``fsdp1``: PyTorch FSDP's per-unit all-gathers and reduce-scatters, exactly
as torch 2.13 issues them, on an FSDP run's trace (:mod:`tracecli.planning.fsdp`).

Unlike the gradient-bucket strategies, an FSDP plan is not a grouping of gradients: its
spec's ``planner`` makes the whole plan (the units' collectives in forward and backward,
compute waiting for all-gathers), and ``applies`` says which traces it plans (FSDP runs of
its system), so ``--compare`` offers it where it applies.
"""

from __future__ import annotations

from typing import Sequence

from ...errors import PlanError
from ..base import Grad, Grouping
from ..fsdp.options import Fsdp1Options, Fsdp2Options
from ..fsdp.plan import applies_to, fsdp_settings, plan_fsdp
from ..fsdp.tune import compare_rows
from ..spec import StrategySpec

__all__ = ["FSDP2", "FSDP1"]


def _not_buckets(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    raise PlanError("FSDP plans units, not gradient buckets: plan an FSDP run's trace with "
                    "--strategy fsdp2 or fsdp1")


def _spec(system: str, options: type) -> StrategySpec:
    return StrategySpec(system, _not_buckets, options, settings=fsdp_settings,
                        title=f"PyTorch {system.upper()}",
                        frameworks=(f"pytorch-{system}",),
                        planner=lambda inp, opts, cost: plan_fsdp(system, inp, opts, cost),
                        applies=applies_to(system),
                        rows=lambda inp, opts, cost: compare_rows(system, inp, opts, cost))


FSDP2 = _spec("fsdp2", Fsdp2Options)
FSDP1 = _spec("fsdp1", Fsdp1Options)
