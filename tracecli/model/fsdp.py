"""What a profiled FSDP run (PyTorch FSDP2 ``fully_shard``, FSDP1
``FullyShardedDataParallel``) shows of its units and collectives, one step.

A *unit* is one FSDP parameter group (FSDP2) or flat parameter (FSDP1): all-gathered as one
collective before its forward (again before its backward when it reshards after forward)
and reduce-scattered as one after its backward (HSDP: then all-reduced over the replicate
dimension). The parsers read these records from FSDP's own profiler labels
(:mod:`tracecli.parsers.kineto_fsdp`); planning reproduces them
(:mod:`tracecli.planning.fsdp`).

A unit is named as FSDP names it: its module's fully qualified name, ``root`` for the root
module's (FSDP2 labels the root's without a name). FSDP1's labels name no module: its units
are named ``root`` and ``unit1``, ``unit2``, ... in forward order unless a parameter sidecar
names them.

>>> FsdpComm(CollectiveKind.ALL_GATHER, "forward", "blocks.0", 8320, "float32", 2).contract()
{'collective': 'allgather', 'phase': 'forward', 'unit': 'blocks.0', 'elements': 8320, 'dtype': 'float32'}
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from .kinds import CollectiveKind

__all__ = ["FsdpComm", "FsdpMark", "FsdpUnit", "FsdpRun", "UnitNode", "CONTRACT_NAMES", "contract_name",
           "ROOT", "FORWARD", "BACKWARD", "MARKS"]

ROOT = "root"
FORWARD, BACKWARD = "forward", "backward"

# The names of the ``collective`` field of an FSDP bucket (the plan contract, issue 27):
# the ``collective`` command's operation names.
CONTRACT_NAMES = {CollectiveKind.ALL_GATHER: "allgather",
                  CollectiveKind.REDUCE_SCATTER: "reducescatter",
                  CollectiveKind.ALL_REDUCE: "allreduce"}

# The kinds of a step program's marks (:class:`FsdpMark`), hooks in the order FSDP runs them.
MARKS = ("compute", "pre_forward", "forward_prefetch", "post_forward", "pre_backward",
         "backward_prefetch", "post_backward", "callback")


def contract_name(kind: CollectiveKind) -> str:
    """The contract's name of an FSDP collective's kind."""
    return CONTRACT_NAMES.get(kind, kind.value)


class FsdpComm(NamedTuple):
    """One collective FSDP issued, in issue order.

    ``elements`` is the unsharded, padded count: an all-gather's output, a reduce-scatter's
    input, an all-reduce's tensor. ``group_size``: the ranks it ran on (a backward
    all-gather of a unit resharded to a smaller group runs on that group). ``via``: how it
    was issued (``unshard``: by its own unit's hook; ``forward_prefetch`` /
    ``backward_prefetch``; FSDP1's ``post_backward_prefetch`` (``BACKWARD_POST``);
    ``post_backward``; ``callback``: FSDP2's
    ``root_post_backward_callback``); ``by``: the unit whose hook issued it. Times are ms
    from the step's start: ``launch_ms`` when the host issued it, ``start_ms``/``end_ms``
    when it ran (``None`` where the trace does not say).
    """

    kind: CollectiveKind
    phase: str
    unit: str
    elements: int
    dtype: Optional[str]
    group_size: Optional[int]
    via: str = "unshard"
    by: str = ""
    collective: Optional[str] = None  # the trace Collective's id
    launch_ms: float = 0.0
    start_ms: Optional[float] = None
    end_ms: Optional[float] = None
    line: Optional[int] = None

    def contract(self) -> dict:
        """The fields the plan contract compares: collective, phase, unit, elements, dtype."""
        return {"collective": contract_name(self.kind), "phase": self.phase, "unit": self.unit,
                "elements": self.elements, "dtype": self.dtype}


class FsdpMark(NamedTuple):
    """One item of a step's program, in the order it ran: ``compute`` (``ms`` of compute
    the stream runs, FSDP's own hooks excluded) or a hook of ``unit`` (:data:`MARKS`):
    ``pre_forward``, ``post_forward``, ``pre_backward``, ``post_backward`` (FSDP2: also
    inside ``callback``, the root's end-of-backward callback), ``forward_prefetch`` /
    ``backward_prefetch`` of ``unit`` as target, ``explicit`` when FSDP2 issued it from a
    ``set_modules_to_*_prefetch`` list (its label at top level) rather than from the
    prefetching unit's hook. ``at_ms``: when it started, from the step's start."""

    kind: str
    unit: str = ""
    ms: float = 0.0
    at_ms: float = 0.0
    explicit: bool = False


class FsdpUnit(NamedTuple):
    """One unit as the run shows it.

    ``parent``: the unit whose forward encloses this one's (``None`` for the root).
    FSDP2: ``shard_numels`` are the padded shard numels of its parameters in all-gather
    layout order (``fsdp::all_gather_copy_in``), ``grad_shapes`` the unpadded shapes of those
    with a gradient, in the same order (``fsdp::chunk_cat``); FSDP1: ``shard_numels`` is
    ``(sharded numel,)`` and ``grad_shapes`` the flat parameter's shape (its gradient).
    ``gradients``: the trace's gradient tensors (ids) of this unit. ``deferred``: reduced
    in the root's end-of-backward callback (its forward inputs need no gradient).
    ``explicit_forward``/``explicit_backward``: FSDP2 ``set_modules_to_*_prefetch`` lists,
    as the labels show them (``None``: none set). ``backward_group``: the group size of its
    backward all-gather (``None``: none; smaller than the shard group for an int
    ``reshard_after_forward``).
    """

    name: str
    parent: Optional[str]
    shard_numels: tuple[int, ...] = ()
    grad_shapes: tuple[tuple[int, ...], ...] = ()
    gradients: tuple[str, ...] = ()
    deferred: bool = False
    explicit_forward: Optional[tuple[str, ...]] = None
    explicit_backward: Optional[tuple[str, ...]] = None
    all_gather_dtype: Optional[str] = None
    reduce_dtype: Optional[str] = None
    backward_group: Optional[int] = None


class UnitNode(NamedTuple):
    """An FSDP unit as a node of the trace's graph (``unit:<name>``): the unit, the unit
    its forward runs in, and the FSDP system."""

    id: str
    name: str
    parent: Optional[str]
    system: str


class FsdpRun(NamedTuple):
    """One step of an FSDP run: its ``system`` (``fsdp2`` or ``fsdp1``), its ranks
    (``world_size`` = ``shard_size`` x ``replicate_size``; HSDP replicates), the units in
    forward order, the collectives FSDP issued in issue order, the step's ``program``
    (compute and hooks, :class:`FsdpMark`) and what a reader must know (``notes``)."""

    system: str
    step: Optional[int]
    world_size: int
    shard_size: int
    replicate_size: int
    units: tuple[FsdpUnit, ...]
    comms: tuple[FsdpComm, ...]
    program: tuple[FsdpMark, ...]
    update_ms: float = 0.0
    notes: tuple[str, ...] = ()
    named_by: str = "labels"  # where unit names come from: labels, order, sidecar
    # The step's compute with FSDP's own time left out, as the compute profile takes it:
    # forward, and each backward op's (op id, ms).
    forward_ms: float = 0.0
    op_ms: tuple[tuple[str, float], ...] = ()

    def unit(self, name: str) -> FsdpUnit:
        return next(u for u in self.units if u.name == name)

    def nodes(self) -> list[UnitNode]:
        """The units as graph nodes."""
        return [UnitNode(f"unit:{u.name}", u.name, u.parent, self.system) for u in self.units]

    def edges(self):
        """``(source, target, kind value)``: each unit to its collectives (``unit_of``), each
        gradient to its unit (``in_unit``)."""
        for u in self.units:
            for g in u.gradients:
                yield g, f"unit:{u.name}", "in_unit"
        for c in self.comms:
            if c.collective is not None:
                yield f"unit:{c.unit}", c.collective, "unit_of"

    def to_json(self) -> dict:
        """``inspect --json``'s ``"fsdp"``: the run's units and the collectives FSDP issued."""
        units = []
        for u in self.units:
            mine = [c for c in self.comms if c.unit == u.name]
            units.append({
                "unit": u.name, "parent": u.parent, "parameters": len(u.shard_numels),
                "gradients": len(u.gradients), "shard_numels": list(u.shard_numels),
                "all_gathers": sum(c.kind is CollectiveKind.ALL_GATHER for c in mine),
                "reduce_scatters": sum(c.kind is CollectiveKind.REDUCE_SCATTER for c in mine),
                "all_reduces": sum(c.kind is CollectiveKind.ALL_REDUCE for c in mine),
                "all_gather_dtype": u.all_gather_dtype, "reduce_dtype": u.reduce_dtype,
                "backward_all_gather_group": u.backward_group, "reduced_at_end": u.deferred,
                "explicit_forward_prefetch": _listed(u.explicit_forward),
                "explicit_backward_prefetch": _listed(u.explicit_backward)})
        comms = [{**c.contract(), "group_size": c.group_size, "via": c.via, "by": c.by,
                  "id": c.collective, "launch_ms": c.launch_ms, "start_ms": c.start_ms,
                  "end_ms": c.end_ms} for c in self.comms]
        return {"system": self.system, "step": self.step, "world_size": self.world_size,
                "shard_size": self.shard_size, "replicate_size": self.replicate_size,
                "units_named_by": self.named_by, "units": units, "collectives": comms,
                "notes": list(self.notes)}


def _listed(names: Optional[tuple[str, ...]]) -> Optional[list[str]]:
    return None if names is None else list(names)

    def contract(self) -> list[dict]:
        """The collectives as the plan contract lists them, in issue order."""
        return [c.contract() for c in self.comms]
