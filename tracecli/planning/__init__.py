"""Planning: bucket strategies, the predicted timeline and the plan, as pure functions of
(gradients in readiness order, compute times, cost model, options); and the plan file's
format (:mod:`.planfile`), the one module here that reads a file."""

from .plan import BucketPlan, PlanInput, compare, make_plan
from .spec import Kind, Knob, StrategySpec
from .strategies import KNOBS, STRATEGIES, Grad, StrategyOptions, predicted, spec_of

__all__ = ["BucketPlan", "PlanInput", "compare", "make_plan", "STRATEGIES", "predicted", "KNOBS",
           "Grad", "StrategyOptions", "StrategySpec", "Knob", "Kind", "spec_of"]
