"""What the pipeline hands the CLI: a trace planned (or compared), with what to tell the user."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..analysis.compute import ComputeProfile
from ..analysis.readiness import Readiness
from ..costs import CostModel
from ..model import Trace
from ..planning.advice import Advice
from ..planning.base import PlanInput
from ..planning.plan import BucketPlan, CompareRow

__all__ = ["Planned"]


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
    advice: tuple[Advice, ...] = ()  # what to set in each framework shown

    def backward_names(self) -> list[tuple[str, float]]:
        """(op name, ms) of the backward ops in execution order, for timelines."""
        return [(self.trace.op(op_id).name, ms) for op_id, ms in self.profile.backward]
