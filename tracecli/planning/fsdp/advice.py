"""FSDP's advice, as data: the tuned configuration against FSDP's defaults for the same
units, under the house rules (DESIGN 5): ``set`` only where the gain exceeds the model's
error on the two plans' communication, or where the defaults exceed the memory budget and
the tuned plan meets it; otherwise ``keep-defaults``, saying why. A model that says
nothing of its error (a preset) cannot justify a change.

The error of a plan is the sum, over its collectives, of each one's time times its cost
model's error band there (:meth:`~tracecli.costs.CostModel.error`); the advice compares the
gain with the larger of the tuned and default plans' errors.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ...model import DTYPE_BYTES
from .timing import cost_bytes
from .tune import GIB

__all__ = ["FsdpAdvice", "fsdp_advice", "plan_error_ms", "ddp_bytes"]


class FsdpAdvice(NamedTuple):
    """One framework's verdict: ``set`` (``paste`` the tuned configuration) or
    ``keep-defaults``, with the times, the model's error on them (``None``: unknown) and
    the memory per GPU of each, against the budget."""

    framework: str
    verdict: str
    best_ms: float
    default_ms: float
    gain_ms: float
    error_ms: Optional[float]
    paste: tuple[str, ...]
    why: str
    best_peak_bytes: int
    default_peak_bytes: int
    budget_gib: Optional[float]
    ddp_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"framework": self.framework, "verdict": self.verdict, "best_ms": self.best_ms,
                "default_ms": self.default_ms, "gain_ms": self.gain_ms, "error_ms": self.error_ms,
                "paste": "\n".join(self.paste), "why": self.why,
                "memory": {"best_peak_bytes": self.best_peak_bytes,
                           "default_peak_bytes": self.default_peak_bytes,
                           "budget_gib": self.budget_gib, "ddp_bytes": self.ddp_bytes}}


def plan_error_ms(plan) -> Optional[float]:
    """The model's error on ``plan``'s communication, ms (``None`` where any collective's is
    unknown)."""
    total = 0.0
    for b in plan.timeline.buckets:
        group = b.group or plan.cost.gpus
        nbytes = cost_bytes(b.collective, b.elements or 0, b.dtype, group)
        model = plan.cost if group == plan.cost.gpus else plan.cost.on(group)
        band = model.error(b.collective, nbytes)
        if band is None:
            return None
        total += band.magnitude * b.duration_ms
    return total


def ddp_bytes(inp) -> int:
    """What DDP holds per GPU for the same gradients: parameters, gradients and its bucket
    copies of them (``gradient_as_bucket_view=False``, the default), in the master dtype."""
    return 3 * sum(g.elements * max(DTYPE_BYTES.get(g.dtype, 4), 4) for g in inp.grads)


def fsdp_advice(system: str, best, default, budget: Optional[float]) -> FsdpAdvice:
    """The advice of ``best`` (the tuned plan) against ``default`` (FSDP's defaults)."""
    gain = default.timeline.iteration_ms - best.timeline.iteration_ms
    errors = [plan_error_ms(best), plan_error_ms(default)]
    error = None if None in errors else max(errors)
    over = budget is not None and default.fsdp.memory.peak > budget * GIB
    title = f"PyTorch {system.upper()}"
    if over:
        verdict = "set"
        why = (f"{title}'s defaults hold {default.fsdp.memory.peak / GIB:.3f} GiB per GPU of "
               f"parameters and gradients, over the {budget:g} GiB budget; this configuration "
               f"holds {best.fsdp.memory.peak / GIB:.3f} GiB")
    elif gain <= 1e-9:
        verdict, why = "keep-defaults", f"no configuration tried is predicted faster than {title}'s defaults"
    elif error is None:
        verdict = "keep-defaults"
        why = (f"the best gain, {gain:.3f} ms, is under a model whose error is unknown here; "
               "measure this machine (tracecli calibrate) before changing settings")
    elif gain <= error:
        verdict = "keep-defaults"
        why = f"the best gain, {gain:.3f} ms, is inside the model's error of ±{error:.3f} ms"
    else:
        verdict = "set"
        why = f"the gain, {gain:.3f} ms, exceeds the model's error of ±{error:.3f} ms"
    paste = best.fsdp.paste if verdict == "set" else default.fsdp.paste
    return FsdpAdvice(f"pytorch-{system}", verdict, best.timeline.iteration_ms,
                      default.timeline.iteration_ms, gain, error, tuple(paste), why,
                      best.fsdp.memory.peak, default.fsdp.memory.peak, budget, ddp_bytes(best.inp))
