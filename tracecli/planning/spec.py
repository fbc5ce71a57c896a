"""What a strategy is (DESIGN 4.4): a spec, and the knobs it reads.

A :class:`StrategySpec` names a strategy and holds everything the rest of tracecli asks of
it: the grouping function (one small signature, the cost model passed in), the knobs it
reads, the framework settings that reproduce its plans, the tuning grid ``--compare``
searches, the framework's title in the advice, and the knobs whose defaults are the
framework's out of the box. The registry (:mod:`.strategies`) keys the specs by name, as
PyTorch's ``ddp_comm_hooks`` keys its hooks, so a new framework's strategy is one module
defining a spec plus one line there.

A :class:`Knob` describes one option without click: the CLI builds its options from the
knob table, :func:`options_type` builds the options record (``StrategyOptions``) from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

from .base import DDP_BUCKET_CAP, DDP_FIRST_BUCKET_BYTES, HOROVOD_THRESHOLD, Grad, Grouping

if TYPE_CHECKING:
    from ..costs import CostModel
    from .base import PlanInput

__all__ = ["Kind", "Knob", "StrategySpec", "Strategy", "Settings", "Tuning", "MAX_BYTES",
           "SPARSE_AS_DENSE", "options_type", "knob_table", "per_bucket_caps", "cap_candidates",
           "mib_text", "MiB"]

MiB = 1024 * 1024


class Kind(Enum):
    """What a knob's value is; the CLI picks the parameter type from it."""

    BYTES = "bytes"  # a positive byte size (32k, 25MiB), or None: unset
    BYTES_OR_ZERO = "bytes-or-zero"  # a byte size, 0 allowed
    MS = "ms"  # a positive time in ms
    TEXT = "text"
    COUNT = "count"  # an integer >= 0
    FLAG = "flag"  # on when given


_TYPES = {Kind.BYTES: Optional[int], Kind.BYTES_OR_ZERO: int, Kind.MS: float, Kind.TEXT: str,
          Kind.COUNT: int, Kind.FLAG: bool}


@dataclass(frozen=True)
class Knob:
    """One strategy option: its field in ``StrategyOptions``, its command-line flag, the
    kind of value, its default and its help line."""

    name: str
    flag: str
    kind: Kind
    default: Any
    help: str


MAX_BYTES = Knob(
    "max_bytes", "--max-bytes", Kind.BYTES, None,
    "Bucket cap in bytes: size and ddp (DDP's bucket_cap_mb, default 25 MiB), horovod "
    "(HOROVOD_FUSION_THRESHOLD, default 128 MiB), optimal (optional cap). 32k or 32KiB = "
    "32,768 bytes; 32KB = 32,000; also M/MiB/MB, G/GiB/GB.")
SPARSE_AS_DENSE = Knob(
    "sparse_as_dense", "--sparse-as-dense", Kind.FLAG, False,
    "Fuse sparse gradients (embeddings) into all-reduce buckets as dense, as Horovod's "
    "sparse_as_dense=True does (default: each is all-gathered on its own).")

Strategy = Callable[[Sequence[Grad], Any, "CostModel"], Grouping]
"""``(gradients in readiness order, StrategyOptions, cost model) -> Grouping``."""
Settings = Callable[[Any], dict]
"""A plan -> what to set in the framework to get it (``{"framework", ..., "text"}``)."""
Tuning = Callable[["PlanInput", Any], Iterable[Any]]
"""(the planner's input, the user's options) -> the candidate options ``--compare`` tries."""


def mib_text(nbytes: int) -> str:
    """Bytes as MiB the way a framework setting is written: 25, 1.5, 0.000954."""
    value = nbytes / MiB
    return f"{value:g}" if value == int(value) else f"{value:.6f}".rstrip("0")


def per_bucket_caps(plan) -> dict[str, Any]:
    """The settings of any contiguous partition in one dtype: DDP's per-bucket caps
    (torch >= 2.13) close bucket k exactly when it holds its bytes."""
    buckets = plan.timeline.buckets
    contiguous = all(b.members == tuple(range(b.members[0], b.members[-1] + 1)) for b in buckets)
    ordered = [m for b in buckets for m in b.members] == list(range(len(plan.inp.grads)))
    if contiguous and ordered and len({b.dtype for b in buckets}) == 1 and "mixed" not in {b.dtype for b in buckets}:
        caps = ", ".join(mib_text(b.nbytes) for b in buckets)
        return {"framework": "pytorch-ddp", "bucket_cap_mb_list": [b.nbytes / MiB for b in buckets],
                "torch": ">=2.13",
                "text": f"DistributedDataParallel(model, bucket_cap_mb_list=[{caps}])  # torch >= 2.13"}
    return {"framework": None, "text": "no framework setting reproduces this plan"}


def cap_candidates(grads: Sequence[Grad]) -> list[int]:
    """Bucket caps a tuning grid tries: powers of two from 64 KiB up to just past the
    total, plus the DDP/Horovod defaults."""
    total = sum(g.nbytes for g in grads)
    sizes, s = [], 64 * 1024
    while s < 2 * max(total, 1):
        sizes.append(s)
        s *= 2
    return sorted(set(sizes + [DDP_BUCKET_CAP, HOROVOD_THRESHOLD, DDP_FIRST_BUCKET_BYTES]))


@dataclass(frozen=True)
class StrategySpec:
    """One strategy.

    ``group`` maps the gradients to buckets; ``knobs`` are the options it reads;
    ``settings`` says what to set in a framework to get a plan; ``tuning``, when given,
    yields the options ``--compare`` tries for the "<name> tuned" row; ``title`` is the
    framework's name in the advice; ``defaults``, when given, are the knobs whose default
    values are what the framework does out of the box (``--compare`` then adds a
    "<name> default" row when the options given are not them). ``from_run``: taken from a
    profiled run, not predicted (``observed``); the pipeline builds it from the trace.
    ``frameworks``: the frameworks of traces (``Abilities.framework``) whose users set it;
    advice leads with the spec serving the trace's own framework. ``setup``: knobs that
    describe the user's run rather than a bucket choice (Megatron's distributed optimizer),
    kept as given in the "<name> default" row.
    """

    name: str
    group: Strategy
    knobs: tuple[Knob, ...] = ()
    settings: Settings = per_bucket_caps
    tuning: Optional[Tuning] = None
    title: Optional[str] = None
    defaults: Optional[tuple[Knob, ...]] = None
    from_run: bool = False
    frameworks: tuple[str, ...] = ()  # the traces' frameworks (Abilities.framework) it serves
    setup: tuple[Knob, ...] = ()

    def is_default(self, options) -> bool:
        """True when ``options`` are the framework's defaults (never without ``defaults``)."""
        return self.defaults is not None and all(
            getattr(options, k.name) == k.default for k in self.defaults)


def knob_table(specs: Iterable[StrategySpec]) -> tuple[Knob, ...]:
    """Every knob once: the cap first, then each strategy's own in registry order, then
    ``--sparse-as-dense`` (the CLI's order and the plan file's)."""
    table = {MAX_BYTES.name: MAX_BYTES}
    for spec in specs:
        for knob in spec.knobs:
            if knob is not SPARSE_AS_DENSE:
                if table.setdefault(knob.name, knob) is not knob:
                    raise ValueError(f"two strategy options are named {knob.name!r}")
    table[SPARSE_AS_DENSE.name] = SPARSE_AS_DENSE
    return tuple(table.values())


def options_type(knobs: Sequence[Knob], module: str) -> type:
    """The frozen record of every knob's value, fields in table order, each defaulting to
    its knob's default: ``StrategyOptions(max_bytes=..., cycle_ms=...)``."""
    cls = dataclasses.make_dataclass(
        "StrategyOptions",
        [(k.name, _TYPES[k.kind], dataclasses.field(default=k.default)) for k in knobs],
        frozen=True)
    cls.__module__ = module  # where pickle finds it (replay sends options to its ranks)
    cls.__doc__ = ("Every strategy option's value (the knob table: ``KNOBS``); a strategy "
                   "reads the knobs its spec lists.")
    return cls
