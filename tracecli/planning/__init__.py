"""Planning: pure functions of (readiness, sizes, compute times, cost model, options)."""

from .plan import BucketPlan, PlanInput, compare, make_plan
from .strategies import STRATEGIES, Grad, StrategyOptions

__all__ = ["BucketPlan", "PlanInput", "compare", "make_plan", "STRATEGIES", "Grad",
           "StrategyOptions"]
