"""Planning: pure functions of (readiness, sizes, compute times, cost model, options)."""

from .costmodel import NETWORKS, CostModel, load_calibration, resolve_cost_model
from .plan import BucketPlan, PlanInput, compare, make_plan
from .strategies import STRATEGIES, Grad, StrategyOptions

__all__ = [
    "NETWORKS", "CostModel", "load_calibration", "resolve_cost_model",
    "BucketPlan", "PlanInput", "compare", "make_plan",
    "STRATEGIES", "Grad", "StrategyOptions",
]
