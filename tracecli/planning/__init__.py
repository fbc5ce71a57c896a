"""Planning: bucket strategies, the predicted timeline and the plan, as pure functions of
(gradients in readiness order, compute times, cost model, options); and the plan file's
format (:mod:`.planfile`), the one module here that reads a file."""

from .plan import BucketPlan, PlanInput, compare, make_plan, options_for
from .spec import Kind, Knob, Options, OptionValues, StrategySpec
from .strategies import KNOBS, STRATEGIES, Grad, options_of, predicted, spec_of

__all__ = ["BucketPlan", "PlanInput", "compare", "make_plan", "STRATEGIES", "predicted", "KNOBS",
           "Grad", "Options", "OptionValues", "StrategySpec", "Knob", "Kind", "spec_of",
           "options_of", "options_for"]
