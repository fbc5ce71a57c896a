"""Planning: pure functions of (readiness, sizes, compute times, cost model, options)."""

from .plan import BucketPlan, PlanInput, compare, make_plan
from .spec import Kind, Knob, StrategySpec
from .strategies import KNOBS, STRATEGIES, Grad, StrategyOptions, predicted, spec_of

__all__ = ["BucketPlan", "PlanInput", "compare", "make_plan", "STRATEGIES", "predicted", "KNOBS",
           "Grad", "StrategyOptions", "StrategySpec", "Knob", "Kind", "spec_of"]
