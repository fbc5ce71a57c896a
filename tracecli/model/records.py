"""The immutable records a trace is made of: ops, tensors, links, collectives, its step
and its metadata.

Ops, tensors, links and collectives are NamedTuples: parsers make hundreds of thousands
of them, and a tuple is the cheapest record Python has. Times are ms from the traced
step's start.

>>> Tensor("t0", TensorKind.PARAMETER, "W", None, dtype="float32", shape=(3, 4)).elements
12
>>> TraceMeta(horovod=True, model_scope="resnet50").to_json()
{'model_scope': 'resnet50', 'sizes': None, 'horovod': True}
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Optional

from .kinds import DTYPE_BYTES, CollectiveKind, EdgeKind, OpKind, Purpose, TensorKind

__all__ = ["Op", "Tensor", "ParamMeta", "NO_META", "MARKS", "Link", "Collective", "StepInfo",
           "TraceMeta", "check_fields", "CHECKPOINT_NOTE"]

# How a trace note begins that says which leaves were (or were not) taken for gradients under
# reentrant checkpointing (a parser writes it; plans repeat it: they plan those gradients)
CHECKPOINT_NOTE = "checkpoint inputs: "


class Op(NamedTuple):
    """One executed op (an immutable record; NamedTuple for cheap bulk construction).

    ``position`` is its place in the file (op records or schedule lines, from 0);
    ``generation`` is Chainer's topological generation of a function (its ``rank``: greater
    than the generations of its inputs' creators); ``inputs``/``outputs`` keep the exact
    order and repeats of the record (a backward op lists the tensors whose gradients it
    produces as outputs); ``partner`` is the forward op of a backward op; ``index`` is the
    trainable-variable index an op list names (Horovod's ``cond_N``, the optimizer's
    ``update_N``). ``start_ms``/``dur_ms`` are recorded times where the trace has them
    (profiler traces).
    """

    id: str
    kind: OpKind
    name: str
    line: int
    position: int
    layer: Optional[str] = None
    generation: Optional[int] = None
    attrs: Optional[Mapping[str, Any]] = None
    inputs: tuple[str, ...] = ()
    input_roles: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    partner: Optional[str] = None
    index: Optional[int] = None
    start_ms: Optional[float] = None  # recorded start, ms from the step's start
    dur_ms: Optional[float] = None  # recorded duration


class ParamMeta(NamedTuple):
    """What a framework marks on one parameter beyond its name, shape and dtype: one record,
    read where a parameter list or sidecar gives it and carried by reference (the same
    object) from the parser's variable to the trace's :class:`Tensor`, readiness's
    gradient, planning's ``Grad`` and the plan file. A parameter without marks holds
    :data:`NO_META`. A new mark is one more field here (and its check in :meth:`read`).

    - ``expert``: Megatron-Core's expert-parallel parameter (``param.allreduce == False``),
      reduced in buffers of its own over the expert data-parallel group;
    - ``shared_embedding``: Megatron-Core's ``param.shared_embedding`` (a word embedding
      tied to the output layer across pipeline stages), alone in its bucket under the
      distributed optimizer;
    - ``comm_dtype``: the dtype DeepSpeed sends the gradient in, where it differs from the
      parameter's (``engine.optimizer.get_param_comm_dtype(p)``: under ``torch_autocast``
      the autocast dtype for the parameters of ``Linear``/``Conv`` modules;
      ``communication_data_type``); ``None``: the parameter's own.

    >>> ParamMeta.read({"name": "w", "expert": True}).to_json()
    {'expert': True}
    >>> ParamMeta.read({"comm_dtype": "torch.bfloat16"}).comm_dtype
    'bfloat16'
    >>> ParamMeta.read({}) is NO_META
    True
    """

    expert: bool = False
    shared_embedding: bool = False
    comm_dtype: Optional[str] = None

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "ParamMeta":
        """The marks of a parameter entry (a sidecar's, a plan file's), each checked; a
        :class:`ValueError` says what is wrong with the first bad one."""
        if not any(key in entry for key in MARKS):
            return NO_META
        for key in ("expert", "shared_embedding"):
            if key in entry and not isinstance(entry[key], bool):
                raise ValueError(f"{key} must be true or false")
        comm = entry.get("comm_dtype")
        if comm is not None:
            if isinstance(comm, str):
                comm = comm.removeprefix("torch.")
            if not isinstance(comm, str) or comm not in DTYPE_BYTES:
                raise ValueError("comm_dtype must be a dtype name, e.g. bfloat16")
        meta = cls(entry.get("expert", False), entry.get("shared_embedding", False), comm)
        return NO_META if meta == NO_META else meta

    def to_json(self) -> dict[str, Any]:
        """The marks set, by name (a sidecar's or plan file's keys)."""
        return {key: value for key, value in zip(self._fields, self)
                if value is not False and value is not None}

    def columns(self) -> dict[str, Any]:
        """The marks as columns of a record's export: the flags always, a value where set."""
        return {key: value for key, value in zip(self._fields, self)
                if isinstance(value, bool) or value is not None}


NO_META = ParamMeta()
"""The marks of a parameter no framework marked (shared by every such parameter)."""

MARKS = ParamMeta._fields
"""The keys of a parameter entry that are marks (a :class:`ParamMeta` field each)."""


class Tensor(NamedTuple):
    """One array of the step. ``nbytes`` is ``None`` where the trace does not say;
    ``meta``: a parameter's marks (:class:`ParamMeta`)."""

    id: str
    kind: TensorKind
    name: str
    nbytes: Optional[int]
    line: Optional[int] = None
    layer: Optional[str] = None
    dtype: Optional[str] = None
    shape: Optional[tuple[int, ...]] = None
    index: Optional[int] = None
    sparse: bool = False  # its gradient is sparse (IndexedSlices): all-gathered, not reduced
    meta: ParamMeta = NO_META  # its marks (NO_META: none), from a parameter sidecar

    @property
    def elements(self) -> Optional[int]:
        """Element count from the shape, else from bytes and dtype; ``None`` if unknown."""
        if self.shape is not None:
            return math.prod(self.shape)
        if self.nbytes is not None and self.dtype in DTYPE_BYTES:
            return self.nbytes // DTYPE_BYTES[self.dtype]
        return None


class Link(NamedTuple):
    """An inferred edge between two nodes that op records do not spell out."""

    source: str
    target: str
    kind: EdgeKind


class Collective(NamedTuple):
    """One collective the traced run executed; times in ms from its step's start.

    ``launch_ms`` is when it was issued, ``start_ms``/``end_ms`` when it ran (the device
    kernel on GPUs, the transport thread on gloo); on a GPU trace every time is the device's
    (a launch: when the compute the host had issued before it was done on the device).
    :class:`Purpose` says what it was for: ``buffers``, ``unused-map`` or ``other``; ``op``
    is its launching op's id when that op belongs to the traced step.

    What one rank's view of a run needs besides: ``group``, the process group's name (as
    recorded, or as inferred from where it ran, see :mod:`tracecli.run.groups`), ``seq`` its
    sequence number in that group where torch records it, ``peer`` the other rank of a
    send or recv (global rank), ``splits`` an all-to-all-v's ``(input, output)`` split sizes
    (rows per rank, as passed to ``all_to_all_single``), ``out_elements`` what it received,
    and ``line``, its launch's line in the trace file.
    """

    id: str
    kind: CollectiveKind
    step: Optional[int]
    elements: Optional[int]
    dtype: Optional[str]
    nbytes: Optional[int]
    launch_ms: float
    start_ms: Optional[float]
    end_ms: Optional[float]
    purpose: Purpose
    group_size: Optional[int] = None
    op: Optional[str] = None
    lane: Optional[str] = None  # where it ran: its GPU stream (or gloo's worker thread)
    group: Optional[str] = None
    seq: Optional[int] = None
    peer: Optional[int] = None
    splits: Optional[tuple[tuple[int, ...], tuple[int, ...]]] = None
    out_elements: Optional[int] = None
    line: Optional[int] = None


class StepInfo(NamedTuple):
    """The traced step, for traces that record several (ms from the step's start)."""

    label: str
    index: Optional[int]
    duration_ms: float
    backward_start_ms: Optional[float]
    backward_end_ms: Optional[float]
    update_ms: Optional[float]
    steps: tuple[str, ...]  # every step the trace holds, by label
    world_size: Optional[int] = None


@dataclass(frozen=True)
class TraceMeta:
    """What a trace says about its run beyond its records.

    ``rank``, ``world_size`` and ``backend`` are the distributed run's, where the trace
    records them; ``notes`` are what a reader of the trace must know (which step was
    picked, how gradients were named); ``sizes`` is the path of the sizes sidecar that
    named and sized its parameters.

    The rest are facts of one format, ``None`` where a trace's format does not record
    them: an op list's (``tf_schedule``) ``model_scope`` and whether it is Horovod's
    (``horovod``); a profiler trace's (``kineto``) ``record_shapes``.
    """

    rank: Optional[int] = None
    world_size: Optional[int] = None
    backend: Optional[str] = None
    notes: tuple[str, ...] = ()
    sizes: Optional[str] = None
    model_scope: Optional[str] = None
    horovod: Optional[bool] = None
    record_shapes: Optional[bool] = None
    fsdp: Optional[Any] = None

    @property
    def distributed(self) -> dict[str, Any]:
        """The run's distributed facts the trace records: ``backend``, ``rank``,
        ``world_size``, in that order, each only where known."""
        facts = {"backend": self.backend, "rank": self.rank, "world_size": self.world_size}
        return {key: value for key, value in facts.items() if value is not None}

    def to_json(self) -> dict[str, Any]:
        """The graph attributes of the exported graph: the facts of the trace's format, in
        that format's order (a profiler trace's, an op list's, or none)."""
        if self.record_shapes is not None:
            return {"distributed": self.distributed, "record_shapes": self.record_shapes,
                    "sizes": self.sizes, "notes": list(self.notes)}
        if self.horovod is not None:
            return {"model_scope": self.model_scope, "sizes": self.sizes, "horovod": self.horovod}
        return {}


def check_fields(record: type, names: str) -> None:
    """Raise unless ``record``'s fields are ``names`` (space-separated), in that order.

    Code that makes hundreds of thousands of records with ``tuple.__new__(Record, values)``
    (a third of the cost of ``Record(...)``, which runs a Python ``__new__``) states the
    fields its ``values`` follow with this call beside it, at import: a field added, removed
    or moved then fails loudly instead of shifting every value after it.

    >>> check_fields(Link, "source target kind")
    >>> check_fields(Link, "source kind")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: Link's fields are now source target kind, not source kind: update the ...
    """
    if record._fields != tuple(names.split()):
        raise TypeError(f"{record.__name__}'s fields are now {' '.join(record._fields)}, not "
                        f"{names}: update the tuple.__new__ construction beside this check")
