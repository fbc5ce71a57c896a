"""What a strategy is (DESIGN 4.4): a spec, its options record, and the knobs it reads.

A :class:`StrategySpec` names a strategy and holds everything the rest of tracecli asks of
it: the grouping function (one small signature, the cost model passed in), its options
record (a frozen dataclass of :class:`Knob` fields, one class a strategy), the framework
settings that reproduce its plans, the tuning grid ``--compare`` searches, the framework's
title in the advice, and the knobs whose defaults are the framework's out of the box. The
registry (:mod:`.strategies`) keys the specs by name, as PyTorch's ``ddp_comm_hooks`` keys
its hooks, so a new framework's strategy is one module defining a spec plus one line there.

A :class:`Knob` describes one option without click, with its bounds: the CLI builds its
flags and their types from the knob table, plan files and options records check values with
the same :meth:`Knob.problem`.

>>> @dataclass(frozen=True)
... class CapOptions(Options):
...     max_bytes: Optional[int] = MAX_BYTES.field()
>>> CapOptions.of({"max_bytes": 1024, "cycle_ms": 2.0})
CapOptions(max_bytes=1024)
>>> CapOptions(max_bytes=0)
Traceback (most recent call last):
...
tracecli.errors.PlanError: max_bytes must be null or a byte count from 1 to 2^50
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

from ..errors import PlanError
from .base import DDP_BUCKET_CAP, DDP_FIRST_BUCKET_BYTES, HOROVOD_THRESHOLD, Grad, Grouping

if TYPE_CHECKING:
    from ..costs import CostModel
    from .base import PlanInput

__all__ = ["Kind", "Knob", "Options", "NoOptions", "OptionValues", "StrategySpec", "Strategy", "Settings",
           "Tuning", "MAX_BYTES", "SPARSE_AS_DENSE", "knob_table", "per_bucket_caps",
           "cap_candidates", "mib_text", "MiB", "MAX_OPTION_BYTES"]

MiB = 1024 * 1024
MAX_OPTION_BYTES = 1 << 50  # a byte-size knob's largest value (1 PiB)
_MAX_COUNT = 1 << 31
_MAX_MS = 1e6
_MAX_TEXT = 1000
_MAX_GIB = 1e6


class Kind(Enum):
    """What a knob's value is; the CLI picks the parameter type from it."""

    BYTES = "bytes"  # a positive byte size (32k, 25MiB), or None: unset
    BYTES_OR_ZERO = "bytes-or-zero"  # a byte size, 0 allowed
    MS = "ms"  # a positive time in ms
    TEXT = "text"
    COUNT = "count"  # an integer >= 0
    FLAG = "flag"  # on when given
    GIB = "gib"  # a positive number of GiB, or None: unset


_WHAT = {Kind.BYTES: "null or a byte count from 1 to 2^50", Kind.BYTES_OR_ZERO:
         "a byte count from 0 to 2^50", Kind.MS: f"a number of ms above 0, at most {_MAX_MS:g}",
         Kind.TEXT: f"a string of at most {_MAX_TEXT:,} characters", Kind.COUNT:
         "an integer from 0 to 2^31", Kind.FLAG: "true or false",
         Kind.GIB: f"null or a number of GiB above 0, at most {_MAX_GIB:g}"}


@dataclass(frozen=True)
class Knob:
    """One strategy option: its field name, its command-line flag, the kind of value (which
    fixes its bounds: :attr:`low`, :attr:`high`), its default and its help line."""

    name: str
    flag: str
    kind: Kind
    default: Any
    help: str

    @property
    def low(self) -> float:
        """The least value (exclusive for ms, which must be above 0)."""
        return {Kind.BYTES: 1, Kind.BYTES_OR_ZERO: 0, Kind.MS: 0.0, Kind.COUNT: 0,
                Kind.GIB: 0.0}.get(self.kind, 0)

    @property
    def high(self) -> float:
        return {Kind.BYTES: MAX_OPTION_BYTES, Kind.BYTES_OR_ZERO: MAX_OPTION_BYTES,
                Kind.MS: _MAX_MS, Kind.COUNT: _MAX_COUNT, Kind.TEXT: _MAX_TEXT,
                Kind.GIB: _MAX_GIB}.get(self.kind, 1)

    def valid(self, value: Any) -> bool:
        """Whether ``value`` is one this knob takes (the type and the bounds)."""
        kind = self.kind
        if kind is Kind.FLAG:
            return isinstance(value, bool)
        if kind is Kind.TEXT:
            return isinstance(value, str) and len(value) <= self.high
        if kind is Kind.MS or (kind is Kind.GIB and value is not None):
            return type(value) in (int, float) and math.isfinite(value) and self.low < value <= self.high
        if kind is Kind.GIB:
            return True
        if value is None and kind is Kind.BYTES:
            return True
        return type(value) is int and self.low <= value <= self.high

    def problem(self, value: Any) -> Optional[str]:
        """What is wrong with ``value`` for this knob, or ``None``."""
        return None if self.valid(value) else f"{self.name} must be {_WHAT[self.kind]}"

    def field(self) -> Any:
        """The dataclass field of this knob in an options record (its default, the knob)."""
        return dataclasses.field(default=self.default, metadata={"knob": self})


class Options:
    """Base of every strategy's options record: a frozen dataclass whose fields are made by
    :meth:`Knob.field`, each value checked by its knob when the record is made."""

    def __post_init__(self) -> None:
        for knob in self.knobs():
            problem = knob.problem(getattr(self, knob.name))
            if problem:
                raise PlanError(problem)

    @classmethod
    def knobs(cls) -> tuple[Knob, ...]:
        """The knobs of the record's fields, in field order."""
        return tuple(f.metadata["knob"] for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, given: Mapping[str, Any]):
        """The record of the values ``given`` for its knobs (others: their defaults); the
        values of knobs it does not read are ignored."""
        return cls(**{k.name: given[k.name] for k in cls.knobs() if k.name in given})

    def to_json(self) -> dict[str, Any]:
        return {k.name: getattr(self, k.name) for k in self.knobs()}


@dataclass(frozen=True)
class NoOptions(Options):
    """The options of a strategy with no knob."""


MAX_BYTES = Knob(
    "max_bytes", "--max-bytes", Kind.BYTES, None,
    "Bucket cap in bytes: size and ddp (DDP's bucket_cap_mb, default 25 MiB), horovod "
    "(HOROVOD_FUSION_THRESHOLD, default 128 MiB), optimal (optional cap). 32k or 32KiB = "
    "32,768 bytes; 32KB = 32,000; also M/MiB/MB, G/GiB/GB.")
SPARSE_AS_DENSE = Knob(
    "sparse_as_dense", "--sparse-as-dense", Kind.FLAG, False,
    "Fuse sparse gradients (embeddings) into all-reduce buckets as dense, as Horovod's "
    "sparse_as_dense=True does (default: each is all-gathered on its own).")

OptionValues = Mapping[str, Any]
"""The strategy options a user gave, by knob name (every flag of the knob table, or any
subset): each strategy reads its own with :meth:`StrategySpec.options_of`."""

Strategy = Callable[[Sequence[Grad], Any, "CostModel"], Grouping]
"""``(gradients in readiness order, the strategy's options record, cost model) -> Grouping``."""
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

    ``group`` maps the gradients to buckets, reading its ``options`` record (the knobs the
    strategy reads, :class:`Options`); ``settings`` says what to set in a framework to get a
    plan; ``tuning``, when given, yields the options ``--compare`` tries for the "<name>
    tuned" row; ``title`` is the framework's name in the advice; ``defaults``, when given,
    are the knobs whose default values are what the framework does out of the box
    (``--compare`` then adds a "<name> default" row when the options given are not them).
    ``from_run``: taken from a profiled run, not predicted (``observed``); the pipeline
    builds it from the trace. ``frameworks``: the frameworks of traces
    (``Abilities.framework``) whose users set it; advice leads with the spec serving the
    trace's own framework. ``setup``: knobs that describe the user's run rather than a bucket
    choice (Megatron's distributed optimizer), kept as given in the "<name> default" row.
    A strategy that plans more than gradient buckets (FSDP's units) makes the whole plan:
    ``planner(inp, options, cost)``; it plans only the inputs ``applies(inp)`` accepts
    (``--compare`` leaves it out elsewhere), and ``rows(inp, options, cost)`` gives its own
    ``--compare`` rows (``[(label, plan)]``: tuned, default) in place of the grid's.
    """

    name: str
    group: Strategy
    options: type = NoOptions
    settings: Settings = per_bucket_caps
    tuning: Optional[Tuning] = None
    title: Optional[str] = None
    defaults: Optional[tuple[Knob, ...]] = None
    from_run: bool = False
    frameworks: tuple[str, ...] = ()  # the traces' frameworks (Abilities.framework) it serves
    setup: tuple[Knob, ...] = ()
    planner: Optional[Callable[..., Any]] = None
    applies: Optional[Callable[[Any], bool]] = None
    rows: Optional[Callable[..., list]] = None

    def __post_init__(self) -> None:
        read = set(self.knobs)
        stray = [k.name for k in (self.defaults or ()) + self.setup if k not in read]
        if stray:
            raise ValueError(f"{self.name}'s defaults or setup name knobs it does not read: {stray}")

    @property
    def knobs(self) -> tuple[Knob, ...]:
        """The knobs the strategy reads: its options record's."""
        return self.options.knobs()

    def options_of(self, given: Any) -> Options:
        """Its options record from ``given``: one already (kept), or a mapping of knob
        values (the flags a user gave; the knobs it does not read are ignored)."""
        if isinstance(given, self.options):
            return given
        if isinstance(given, Options):
            given = given.to_json()
        return self.options.of(given or {})

    def is_default(self, options) -> bool:
        """True when ``options`` are the framework's defaults (never without ``defaults``)."""
        return self.defaults is not None and all(
            getattr(options, k.name) == k.default for k in self.defaults)

    def out_of_the_box(self, options: Options) -> Options:
        """The framework out of the box in the user's setup: every knob at its default but
        the ``setup`` knobs, kept as given."""
        return self.options(**{k.name: getattr(options, k.name) for k in self.setup})


def knob_table(specs: Iterable[StrategySpec]) -> tuple[Knob, ...]:
    """Every knob once: the cap first, then each strategy's own in registry order, then
    ``--sparse-as-dense`` (the CLI's order)."""
    table = {MAX_BYTES.name: MAX_BYTES}
    for spec in specs:
        for knob in spec.knobs:
            if knob is not SPARSE_AS_DENSE:
                if table.setdefault(knob.name, knob) is not knob:
                    raise ValueError(f"two strategy options are named {knob.name!r}")
    table[SPARSE_AS_DENSE.name] = SPARSE_AS_DENSE
    return tuple(table.values())
