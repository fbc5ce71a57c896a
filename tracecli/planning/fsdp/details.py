"""What an FSDP plan carries beside its buckets: its units with their sizes and settings,
the memory its parameters and gradients hold, and the code that sets it up
(``plan-buckets --json``: ``"fsdp"``)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ...model import CollectiveKind
from .model import FsdpInput, unit_sizes

__all__ = ["Details", "UnitRow", "Memory", "channel_of", "CHANNELS"]

CHANNELS = {CollectiveKind.ALL_GATHER: "allgather", CollectiveKind.REDUCE_SCATTER: "reducescatter",
            CollectiveKind.ALL_REDUCE: "allreduce"}


def channel_of(kind: CollectiveKind) -> str:
    """The schedule channel of an FSDP collective: FSDP runs all-gathers, reduce-scatters
    and HSDP's all-reduces on streams of their own (``FSDPCommContext``)."""
    return CHANNELS[kind]


class UnitRow(NamedTuple):
    """One unit as planned: the modules ``fully_shard`` takes, its sizes on the plan's
    shard group, its dtypes and settings."""

    name: str
    members: tuple[str, ...]
    parameters: int
    all_gather_elements: int
    reduce_scatter_elements: int
    all_gather_dtype: Optional[str]
    reduce_dtype: Optional[str]
    reshard_after_forward: Any
    forward_prefetch: Optional[tuple[str, ...]]
    backward_prefetch: Optional[tuple[str, ...]]
    deferred: bool

    def to_json(self) -> dict[str, Any]:
        return {"unit": self.name, "modules": list(self.members), "parameters": self.parameters,
                "all_gather_elements": self.all_gather_elements,
                "reduce_scatter_elements": self.reduce_scatter_elements,
                "all_gather_dtype": self.all_gather_dtype, "reduce_dtype": self.reduce_dtype,
                "reshard_after_forward": self.reshard_after_forward,
                "forward_prefetch": None if self.forward_prefetch is None else list(self.forward_prefetch),
                "backward_prefetch": None if self.backward_prefetch is None else list(self.backward_prefetch),
                "reduced_at_end": self.deferred}


class Memory(NamedTuple):
    """Per rank, bytes of parameters and gradients: ``sharded`` (the shards every rank
    keeps, parameters and reduced gradients) and ``peak`` (that plus the most unsharded
    parameters, unsharded gradients and reduce-scatter buffers held at once)."""

    sharded: int
    peak: int

    def to_json(self) -> dict[str, Any]:
        gib = 1 << 30
        return {"sharded_bytes": self.sharded, "peak_bytes": self.peak,
                "peak_gib": round(self.peak / gib, 6)}


class Details(NamedTuple):
    """An FSDP plan's ``"fsdp"`` document: ``system``, ranks, units, settings, memory."""

    system: str
    world: int
    shard: int
    replicate: int
    units: tuple[UnitRow, ...]
    memory: Optional[Memory] = None
    settings: dict = {}
    paste: tuple[str, ...] = ()
    advice: Any = None  # the tuned plan's FsdpAdvice (--compare)

    @classmethod
    def of_run(cls, f: FsdpInput) -> "Details":
        """The run's own units and settings, as its trace shows them."""
        rows = []
        for u in f.units:
            ag, rs = unit_sizes(u, f.shard, f.shard)
            rows.append(UnitRow(u.name, u.members, len(u.params), ag, rs, f.param_dtype,
                                f.reduce_dtype, f.reshard.get(u.name),
                                f.explicit_forward.get(u.name), f.explicit_backward.get(u.name),
                                u.deferred))
        return cls(f.system, f.world, f.shard, f.replicate, tuple(rows))

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"system": self.system, "world_size": self.world,
                               "shard_size": self.shard, "replicate_size": self.replicate,
                               "units": [u.to_json() for u in self.units]}
        if self.memory is not None:
            doc["memory"] = self.memory.to_json()
        if self.settings:
            doc["settings"] = dict(self.settings)
        if self.paste:
            doc["paste"] = list(self.paste)
        if self.advice is not None:
            doc["advice"] = self.advice.to_json()
        return doc
