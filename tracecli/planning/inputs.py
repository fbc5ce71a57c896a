"""From analyses to planning: the gradients in readiness order with their ready times."""

from __future__ import annotations

from typing import Optional

from ..analysis.compute import ComputeProfile
from ..analysis.readiness import Readiness
from ..errors import PlanError
from ..model import OpKind, Purpose, Trace, VariableOrder
from .base import Grad
from .fsdp.model import fsdp_input
from .plan import PlanInput

__all__ = ["plan_input", "variable_order", "left_out_notice"]


def variable_order(trace: Trace) -> dict[str, int]:
    """Each parameter's place in the model's variable order.

    ``VariableOrder.INDEX`` (op lists): the trainable-variable index. ``FIRST_USE``
    (Chainer dumps): order of first use in forward (``link.params()`` follows definition
    order, which forward order matches for sequential models).
    """
    params = trace.parameters()
    if trace.abilities.variable_order is VariableOrder.INDEX:
        return {t.id: (t.index if t.index is not None else i) for i, t in enumerate(params)}
    first_use: dict[str, tuple] = {}
    for op in trace.ops():
        if op.kind is OpKind.FORWARD:
            for k, tid in enumerate(op.inputs):
                key = (op.generation, op.position, k)
                if tid not in first_use or key < first_use[tid]:
                    first_use[tid] = key
    ranked = sorted(params, key=lambda t: first_use.get(t.id, (float("inf"), 0, 0)))
    return {t.id: i for i, t in enumerate(ranked)}


def plan_input(trace: Trace, ready: Readiness, profile: ComputeProfile,
               update_ms: float = 0.0) -> PlanInput:
    unknown = [g.name for g in ready.gradients if g.nbytes is None]
    hint = trace.abilities.sizes_hint or "the trace does not record them"
    if unknown and len(unknown) == len(ready.gradients):
        raise PlanError(f"sizes of {len(unknown)} gradients are unknown "
                        f"(e.g. {unknown[0]}): {hint}{_what_works(trace, hint)}", path=trace.path)
    if not ready.gradients:
        why = ("no backward op produces a parameter's gradient" if trace.parameters()
               else "it has no parameters")
        raise PlanError(f"no gradients to plan: {why}", path=trace.path)
    order = variable_order(trace)
    unknown_order = ({t.id for t in trace.parameters() if t.index is None}
                     if trace.abilities.variable_order is VariableOrder.INDEX else set())
    grads = tuple(
        Grad(g.name, g.nbytes, g.dtype or "float32",
             g.elements if g.elements is not None else g.nbytes // 4,
             profile.ready_at(g.backward_position), order.get(g.tensor_id, i), g.sparse,
             g.meta, g.tensor_id not in unknown_order)
        for i, g in enumerate(ready.gradients) if g.nbytes is not None
    )
    fsdp = None
    if trace.meta.fsdp is not None:
        index_of = {g.tensor_id: i for i, g in enumerate(
            g for g in ready.gradients if g.nbytes is not None)}
        fsdp = fsdp_input(trace.meta.fsdp, index_of)
    return PlanInput(grads, profile.forward_ms, profile.backward_end_ms, update_ms, profile.source,
                     tuple(unknown), hint if unknown else "", fsdp=fsdp)


def _what_works(trace: Trace, hint: str) -> str:
    """What plans this trace as it is: the run's own buckets, where it recorded the sizes
    of its gradient all-reduces, and a parameter sidecar."""
    ways = []
    if any(c.nbytes is not None and c.purpose is Purpose.GRADIENTS for c in trace.collectives()):
        ways.append("--strategy observed plans the run's own buckets from the all-reduce sizes "
                    "the trace recorded")
    if "--sizes" not in hint:
        ways.append("--sizes FILE (a parameter sidecar, docs/inputs.md) sizes every gradient")
    return "; now: " + ", and ".join(ways) if ways else ""


def left_out_notice(inp: PlanInput) -> Optional[str]:
    """What the reader of a plan must know about the gradients it leaves out."""
    if not inp.left_out:
        return None
    total = len(inp.grads) + len(inp.left_out)
    names = ", ".join(inp.left_out[:5]) + (", ..." if len(inp.left_out) > 5 else "")
    return (f"planned {len(inp.grads)} of {total} gradients; left out {len(inp.left_out)} "
            f"whose size is unknown ({names}): {inp.left_out_why}")
