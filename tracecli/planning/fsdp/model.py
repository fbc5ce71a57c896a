"""The planner's view of an FSDP run: its units with their parameters' sizes, what the run
set (resharding, prefetch, dtypes, mesh), and the step's program, from the run's trace.

Sizes follow FSDP's own rules (torch 2.13). FSDP2 shards each parameter on dim 0 with
``torch.chunk``: a rank's padded shard has ``ceil(d0 / S)`` rows (``_fsdp_param.py:298-305``),
so a unit's all-gather output is ``S x`` the sum of its padded shard numels and its
reduce-scatter input the sum of ``ceil(d0 / S) * S`` rows of each parameter with a gradient
(``_fsdp_collectives.py:592-601``). FSDP1 flattens a unit into one ``FlatParameter`` of
``N`` elements; both collectives carry ``S * ceil(N / S)`` (``_flat_param.py:1278-1292``),
which is the same formula for one 1-D parameter of ``N``.

>>> padded_shard_numel((37, 15), 2), padded_numel((37, 15), 2), padded_shard_numel((1, 15), 2)
(285, 570, 15)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Optional

from ...errors import PlanError
from ...model import CollectiveKind
from ...model.fsdp import FsdpComm, FsdpMark, FsdpRun

__all__ = ["UnitParam", "Unit", "FsdpInput", "fsdp_input", "padded_shard_numel",
           "padded_numel", "unit_sizes"]


def padded_shard_numel(shape: tuple[int, ...], shard: int) -> int:
    """One rank's padded shard of a parameter sharded on dim 0 over ``shard`` ranks."""
    if not shape:
        raise PlanError("FSDP shards parameters on dim 0: a 0-dim (scalar) parameter cannot be "
                        "sharded (fully_shard refuses it)")
    rows = -(-shape[0] // shard)
    return rows * math.prod(shape[1:])


def padded_numel(shape: tuple[int, ...], shard: int) -> int:
    """A parameter's gradient padded for the reduce-scatter: ``ceil(d0 / S) * S`` rows."""
    return padded_shard_numel(shape, shard) * shard


class UnitParam(NamedTuple):
    """One parameter of a unit, in all-gather layout order: its padded shard numel at the
    run's shard size, its unpadded shape where the trace shows it (``None`` otherwise), and
    whether it gets a gradient (only those are reduce-scattered)."""

    shard_numel: int
    shape: Optional[tuple[int, ...]]
    grad: bool = True


class Unit(NamedTuple):
    """A unit the planner schedules: its parameters, the units it sits in, the modules
    ``fully_shard`` takes for it, whether the root's end-of-backward callback reduces it,
    and its gradients (indices into the plan's gradients)."""

    name: str
    parent: Optional[str]
    params: tuple[UnitParam, ...]
    members: tuple[str, ...]
    deferred: bool = False
    gradients: tuple[int, ...] = ()


def unit_sizes(unit: Unit, shard: int, run_shard: int) -> tuple[int, int]:
    """``(all-gather elements, reduce-scatter elements)`` of ``unit`` on ``shard`` ranks."""
    ag = rs = 0
    for p in unit.params:
        if shard == run_shard:
            n = p.shard_numel
        elif p.shape is not None:
            n = padded_shard_numel(p.shape, shard)
        else:
            raise PlanError(f"unit {unit.name} has a parameter without a gradient whose shape "
                            f"the trace does not show: its padding on {shard} ranks is unknown; "
                            f"plan on the run's {run_shard}")
        ag += n
        if p.grad:
            rs += n
    return ag * shard, rs * shard


@dataclass(frozen=True)
class FsdpInput:
    """What planning knows of an FSDP run: its system and ranks, units in forward order,
    what the run set per unit (``reshard``: True, False or the int group it reshards to;
    explicit prefetch lists), the dtypes it communicated in, the program, and the run's
    own collectives (``comms``) with the units' gradients (``members``)."""

    system: str
    world: int
    shard: int
    replicate: int
    units: tuple[Unit, ...]
    program: tuple[FsdpMark, ...]
    comms: tuple[FsdpComm, ...]
    reshard: Mapping[str, object] = field(default_factory=dict)
    explicit_forward: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    explicit_backward: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    param_dtype: Optional[str] = None  # the all-gathers' dtype
    reduce_dtype: Optional[str] = None  # the reduce-scatters' dtype
    backward_prefetch: str = "pre"  # FSDP1: pre, post (or none: the run cannot tell)
    forward_prefetch: bool = False  # FSDP1
    notes: tuple[str, ...] = ()

    def unit(self, name: str) -> Unit:
        for u in self.units:
            if u.name == name:
                return u
        raise PlanError(f"no FSDP unit {name!r}; the run's units: "
                        + ", ".join(u.name for u in self.units))


def fsdp_input(run: FsdpRun, index_of: Mapping[str, int]) -> FsdpInput:
    """The planner's input of ``run``; ``index_of`` maps the trace's gradient tensors to
    their place among the plan's gradients."""
    units = tuple(_unit(run, u, index_of) for u in run.units)
    reshard: dict[str, object] = {}
    for u in run.units:
        if u.backward_group is None:
            reshard[u.name] = False
        else:
            reshard[u.name] = True if u.backward_group == run.shard_size else u.backward_group
    gathers = [c for c in run.comms if c.kind is CollectiveKind.ALL_GATHER]
    reduces = [c for c in run.comms if c.kind is CollectiveKind.REDUCE_SCATTER]
    vias = {c.via for c in gathers if c.phase == "backward"}
    backward = "pre" if "backward_prefetch" in vias else (
        "post" if "post_backward_prefetch" in vias else "post")
    return FsdpInput(run.system, run.world_size, run.shard_size, run.replicate_size, units,
                     run.program, run.comms, reshard,
                     {u.name: u.explicit_forward for u in run.units if u.explicit_forward},
                     {u.name: u.explicit_backward for u in run.units if u.explicit_backward},
                     gathers[0].dtype if gathers else None, reduces[0].dtype if reduces else None,
                     backward, any(c.via == "forward_prefetch" for c in gathers), run.notes)


def _unit(run: FsdpRun, u, index_of: Mapping[str, int]) -> Unit:
    """A unit's parameters: FSDP2's padded shard numels matched with the gradient shapes in
    layout order (``chunk_cat`` lists only parameters with a gradient); FSDP1's one flat
    parameter."""
    shapes = list(u.grad_shapes)
    params = []
    for numel in u.shard_numels:
        if shapes and padded_shard_numel(shapes[0], run.shard_size) == numel:
            params.append(UnitParam(numel, tuple(shapes.pop(0)), True))
        else:
            params.append(UnitParam(numel, None, False))
    if not u.shard_numels:  # no all-gather seen: sized by its reduce-scatter, if any
        params = [UnitParam(padded_shard_numel(s, run.shard_size), tuple(s), True) for s in shapes]
    members = (u.name,)
    return Unit(u.name, u.parent, tuple(params), members, u.deferred,
                tuple(sorted(index_of[g] for g in u.gradients if g in index_of)))
