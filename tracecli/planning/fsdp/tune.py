"""FSDP's ``--compare`` rows: the best wrapping, resharding and prefetch under a memory
budget (``fsdp2 tuned``), and FSDP's defaults for the same units (``fsdp2 default``).

Candidates: the run's units, all but the root unwrapped, and runs of K consecutive sibling
units grouped (K = 2, 4, 8 where there are that many); each with ``reshard_after_forward``
true or false; and (FSDP2) implicit prefetching or explicit lists of depth 2 (FSDP1:
``BACKWARD_PRE`` / ``BACKWARD_POST``, ``forward_prefetch`` on or off). A plan over
the budget (peak parameter and gradient bytes per GPU) is never the tuned row; if no
candidate meets it, that is an error naming the least any needs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from ...errors import PlanError
from ...units import format_size

__all__ = ["compare_rows", "candidates", "torch_defaults", "GIB"]

GIB = 1 << 30


def torch_defaults(system: str, options):
    """The same units, dtypes and mesh with FSDP's own defaults: every unit but the root
    resharded after forward, implicit prefetching (FSDP1: ``BACKWARD_PRE``, no forward
    prefetch, ``limit_all_gathers``)."""
    if system == "fsdp2":
        return replace(options, fsdp_reshard_after_forward="true", fsdp_prefetch="implicit")
    return replace(options, fsdp_reshard_after_forward="true", fsdp1_backward_prefetch="pre",
                   fsdp1_forward_prefetch="false", fsdp1_limit_all_gathers="true")


def candidates(system: str, inp, options) -> Iterator:
    """Every configuration ``--compare`` tries (see the module's docstring)."""
    f = inp.fsdp
    inner = [u for u in f.units if u.parent is not None]
    wraps = ["run", "root"] + [f"every:{k}" for k in (2, 4, 8) if k <= len(inner)]
    reshards = ["true", "false"]
    for wrap in wraps:
        for reshard in reshards:
            if system == "fsdp2":
                for depth in ("implicit", "2"):
                    yield replace(options, fsdp_wrap=wrap, fsdp_reshard_after_forward=reshard,
                                  fsdp_prefetch=depth)
            else:
                for mode in ("pre", "post"):
                    for forward in ("false", "true"):
                        yield replace(options, fsdp_wrap=wrap,
                                      fsdp_reshard_after_forward=reshard,
                                      fsdp1_backward_prefetch=mode, fsdp1_forward_prefetch=forward)


def _fits(plan, budget) -> bool:
    return budget is None or plan.fsdp.memory.peak <= budget * GIB


def compare_rows(system: str, inp, options, cost) -> list[tuple[str, object]]:
    """``[("<system> tuned", plan), ("<system> default", plan)]``."""
    from ..plan import make_plan
    from .advice import fsdp_advice

    budget = options.memory_gib
    plans = []
    for o in candidates(system, inp, options):
        try:
            plans.append(make_plan(inp, system, o, cost))
        except PlanError:
            continue  # a configuration this run cannot take (e.g. sizes unknown at a new size)
    fitting = [p for p in plans if _fits(p, budget)]
    if not fitting:
        least = min((p.fsdp.memory.peak for p in plans), default=0)
        raise PlanError(f"no {system} wrapping, resharding or prefetch tried fits --memory-gib "
                        f"{budget:g}: the least any needs is {format_size(least)} per GPU of "
                        "parameters and gradients; raise the budget or add GPUs (--gpus)")
    best = min(fitting, key=lambda p: (round(p.timeline.iteration_ms, 9), p.fsdp.memory.peak))
    default = make_plan(inp, system, torch_defaults(system, options), cost)
    advice = fsdp_advice(system, best, default, budget)
    best = replace(best, fsdp=best.fsdp._replace(advice=advice))
    return [(f"{system} tuned", best), (f"{system} default", default)]
