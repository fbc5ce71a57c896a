"""What a profiled PyTorch run shows of DDP beyond its gradients: the model's parameters in
definition order (its sidecar), those without a gradient this step, and DDP's mode
(:mod:`tracecli.planning.strategies.ddp_modes`), for ``--strategy ddp`` to plan the buckets
DDP really used."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..analysis.readiness import Readiness
from ..errors import TraceCliError
from ..model import Purpose, Trace
from ..planning.base import PlanInput
from ..planning.strategies.ddp_modes import RunMode, ddp_params, run_mode

__all__ = ["ddp_setup", "with_mode"]


def _variables(trace: Trace):
    if not trace.meta.sizes:
        return None
    from ..parsers.sizes import load_sizes

    try:
        return load_sizes(trace.meta.sizes)
    except (TraceCliError, OSError):  # read once already, by the parser: it said what failed
        return None


def ddp_setup(trace: Trace, ready: Readiness, inp: PlanInput) -> tuple[PlanInput, Optional[RunMode]]:
    """``inp`` with the model's parameters where a sidecar names them, and DDP's mode where
    the traced step shows one that is not the default."""
    if trace.abilities.framework != "pytorch" or inp.unit_gradients:
        return inp, None
    step = trace.step.index if trace.step is not None else None
    collectives = [c for c in trace.collectives() if c.step == step]
    grads_bytes = sum(c.nbytes or 0 for c in collectives if c.purpose is Purpose.GRADIENTS)
    used_map = next((c for c in collectives if c.purpose is Purpose.UNUSED_MAP), None)
    variables = _variables(trace)
    params = ()
    if variables is not None:
        shapes = {g.name: g.shape for g in ready.gradients}
        params = ddp_params(inp.grads, [shapes.get(g.name) for g in inp.grads], variables)
    used = sum(g.nbytes for g in inp.grads)
    idle = sum(p.nbytes for p in params if p.grad is None)
    mode = run_mode(grads_bytes, used_map is not None, used_map.elements if used_map else None,
                    used, idle) if collectives else None
    if params and idle and (mode is None or not mode.travelling):
        params = tuple(p for p in params if p.grad is not None)  # frozen: DDP leaves them out
    return (replace(inp, params=params) if params else inp), mode


def with_mode(options, mode: Optional[RunMode]) -> tuple[dict, tuple[str, ...]]:
    """The strategy options with DDP's mode as the trace shows it (a flag the user gave
    stays on), and the notice saying so."""
    options = dict(options or {})
    if mode is None:
        return options, ()
    options["find_unused_parameters"] = options.get("find_unused_parameters") or mode.find_unused_parameters
    options["static_graph"] = options.get("static_graph") or mode.static_graph
    built = ("the buckets DDP built at construction, never rebuilt" if mode.find_unused_parameters
             else "DDP's rebuild with the parameters without a gradient last")
    return options, (f"the trace shows DDP with {mode.why}: ddp plans {built}",)
