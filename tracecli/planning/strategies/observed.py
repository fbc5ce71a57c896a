"""``observed``: the buckets a profiled run used, with the times it measured.

Nothing is predicted: the pipeline builds this plan from the trace's own collectives
(:mod:`..observed`); its spec is in the registry so the CLI offers it and dispatch asks the
spec (``from_run``), not the name.
"""

from __future__ import annotations

from typing import Any, Sequence

from ...errors import PlanError
from ..base import Grad, Grouping
from ..spec import StrategySpec, per_bucket_caps

__all__ = ["OBSERVED", "as_run_settings"]


def _taken_from_the_run(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    raise PlanError(f"the {OBSERVED.name} strategy is not predicted: it is the "
                    "buckets a profiled run used, planned from a trace that recorded its collectives")


def as_run_settings(plan) -> dict[str, Any]:
    """DDP's per-bucket caps when every bucket is matched to its gradients; an FSDP run's
    own units and settings."""
    if plan.fsdp is not None:
        return {"framework": None, "text": f"the run's own {plan.fsdp.system} units and settings"}
    if not all(b.members for b in plan.timeline.buckets):
        return {"framework": None, "text": "the run's own buckets"}
    return per_bucket_caps(plan)


OBSERVED = StrategySpec("observed", _taken_from_the_run, settings=as_run_settings, from_run=True)
