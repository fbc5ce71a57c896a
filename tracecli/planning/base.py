"""Types shared by the strategies and the planner (each strategy's options record lives
with its spec: :mod:`.spec`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Sequence

from ..errors import PlanError
from ..model import NO_META, CollectiveKind, ParamMeta

__all__ = ["Grad", "Grouping", "Message", "PlanInput", "FixedPlan",
           "DDP_FIRST_BUCKET_BYTES", "DDP_BUCKET_CAP", "HOROVOD_THRESHOLD", "sparse_alone",
           "collectives_of"]

DDP_FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DDP_BUCKET_CAP = 25 * 1024 * 1024  # DistributedDataParallel(bucket_cap_mb=25)
HOROVOD_THRESHOLD = 128 * 1024 * 1024  # HOROVOD_FUSION_THRESHOLD default since v0.21


class Grad(NamedTuple):
    """One gradient as planning sees it, in readiness order.

    ``order`` is its place in the model's trainable-variable order (tf_cnn_benchmarks
    groups gradients in that order, Megatron-Core walks it reversed; not readiness order).
    ``meta``: the parameter's marks (:class:`~tracecli.model.ParamMeta`: Megatron-Core's
    expert and shared-embedding parameters, DeepSpeed's communication dtype), the record
    the parser read, by reference. ``order_known``: False where the trace does not say the gradient's place in the
    variable order (a profiled gradient the sidecar could not name); ``order`` is then its
    place among the trace's parameters.
    """

    name: str
    nbytes: int
    dtype: str
    elements: int
    ready_ms: float
    order: int
    sparse: bool = False  # an IndexedSlices / sparse gradient
    meta: ParamMeta = NO_META
    order_known: bool = True


class Message(NamedTuple):
    """What a bucket sends, where not exactly its gradients' bytes: ``nbytes`` in ``dtype``
    (Megatron-Core's padded buckets, reduced in fp32; DeepSpeed's communication dtype), as
    one collective, or as ``pieces``: the bytes of each of the several collectives it is
    sent as, in order, summing to ``nbytes`` (DeepSpeed's flush of a parameter past
    ``reduce_bucket_size``, all-reduced in the pieces its ZeRO partitions cut); ``()``: one."""

    nbytes: int
    dtype: str
    pieces: tuple[int, ...] = ()


class Grouping(NamedTuple):
    """Buckets in launch order; ``not_before`` delays a bucket's launch (Horovod's cycle);
    ``collectives`` names each bucket's collective (default: all-reduce); ``messages``,
    where a bucket's collective does not carry exactly its gradients' bytes as one
    collective, gives each bucket's :class:`Message` (a ``(bytes, dtype)`` pair is read as
    one); ``notes``: what the reader of the plan must know of how it was grouped."""

    buckets: list[tuple[int, ...]]
    not_before: Optional[list[float]] = None
    collectives: Optional[list[CollectiveKind]] = None
    messages: Optional[list[Message]] = None
    notes: tuple[str, ...] = ()


def sparse_alone(grads: Sequence[Grad], opts) -> set[int]:
    """The gradients that travel on their own as an all-gather: the sparse ones, unless the
    options densify them (Horovod's ``sparse_as_dense=True``)."""
    if opts.sparse_as_dense:
        return set()
    return {i for i, g in enumerate(grads) if g.sparse}


def collectives_of(buckets: list[tuple[int, ...]], alone: set[int]) -> Optional[list[CollectiveKind]]:
    """Each bucket's collective: a lone sparse gradient is all-gathered."""
    if not alone:
        return None
    gather, reduce = CollectiveKind.ALL_GATHER, CollectiveKind.ALL_REDUCE
    return [gather if len(b) == 1 and b[0] in alone else reduce for b in buckets]


@dataclass(frozen=True)
class PlanInput:
    """What planning needs from a trace: gradients in readiness order and compute times."""

    grads: tuple[Grad, ...]
    forward_ms: float
    backward_end_ms: float  # absolute: forward + backward
    update_ms: float = 0.0
    compute_source: str = ""
    left_out: tuple[str, ...] = ()  # gradients of the trace not planned (sizes unknown)
    left_out_why: str = ""
    # How many of the trace's gradients each planning unit holds, when the units are the
    # run's buckets (sizes known per bucket only); () when each unit is one gradient.
    unit_gradients: tuple[int, ...] = ()
    # A sharded run's units and program (FSDP: planning.fsdp.model.FsdpInput), or None.
    fsdp: Any = None
    # The model's parameters in definition order, where a sidecar names them (DDP's
    # construction buckets and its parameters without a gradient: strategies.ddp_modes.Param)
    params: tuple = field(default=(), compare=False)

    @property
    def gradient_count(self) -> int:
        """The trace's gradients these units stand for."""
        return sum(self.unit_gradients) if self.unit_gradients else len(self.grads)

    def gradients_in(self, members) -> int:
        """The trace's gradients in a bucket of these units."""
        return sum(self.unit_gradients[i] for i in members) if self.unit_gradients else len(members)

    def __post_init__(self):
        if not self.grads:
            raise PlanError("no gradients to plan: the trace has no parameters "
                            "with known sizes (pass --sizes FILE for an op list)")


@dataclass(frozen=True)
class FixedPlan:
    """A grouping decided elsewhere (a plan file's, the run's own): buckets of gradient
    indices in launch order, and each bucket's collective (default: all-reduce)."""

    buckets: tuple[tuple[int, ...], ...]
    strategy: str
    collectives: Optional[tuple[CollectiveKind, ...]] = None
    messages: Optional[tuple[Message, ...]] = None  # as Grouping.messages
