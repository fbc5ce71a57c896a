"""``ddp``: PyTorch DDP's ``compute_bucket_assignment_by_size`` after the bucket rebuild (or,
with ``find_unused_parameters=True``, the construction-time buckets it keeps; with
``static_graph=True``, the rebuild with unused parameters last: :mod:`.ddp_modes`), its
``DistributedDataParallel(bucket_cap_mb=...)`` setting and its tuning grid."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from ..base import DDP_BUCKET_CAP, DDP_FIRST_BUCKET_BYTES, Grad, Grouping, collectives_of, sparse_alone
from ..spec import (
    MAX_BYTES, SPARSE_AS_DENSE, Kind, Knob, MiB, Options, StrategySpec, cap_candidates, mib_text,
    trace_input,
)
from .ddp_modes import construction_buckets, static_graph_order

__all__ = ["ddp", "ddp_buckets", "ddp_limits", "ddp_settings", "ddp_tuning", "FIRST_BUCKET_BYTES",
           "FIND_UNUSED", "STATIC_GRAPH", "SPEC", "DdpOptions"]

FIRST_BUCKET_BYTES = Knob(
    "first_bucket_bytes", "--first-bucket-bytes", Kind.BYTES, None,
    "ddp: first bucket cap in bytes (default as torch: 1 MiB unless --max-bytes is given, "
    "then the same).")


FIND_UNUSED = Knob(
    "find_unused_parameters", "--find-unused-parameters", Kind.FLAG, False,
    "ddp: DistributedDataParallel(find_unused_parameters=True): the buckets made at "
    "construction (definition order, reversed) every step, never rebuilt (default: as a "
    "profiler trace shows it).")
STATIC_GRAPH = Knob(
    "static_graph", "--static-graph", Kind.FLAG, False,
    "ddp: DistributedDataParallel(static_graph=True): rebuilt in ready order with the "
    "parameters without a gradient last (default: as a profiler trace shows it).")


@dataclass(frozen=True)
class DdpOptions(Options):
    max_bytes: Optional[int] = MAX_BYTES.field()  # bucket_cap_mb, in bytes
    first_bucket_bytes: Optional[int] = FIRST_BUCKET_BYTES.field()
    sparse_as_dense: bool = SPARSE_AS_DENSE.field()
    find_unused_parameters: bool = FIND_UNUSED.field()
    static_graph: bool = STATIC_GRAPH.field()
    params: tuple = trace_input()  # the model's parameters (ddp_modes.Param), where known

    @property
    def rebuilt(self) -> bool:
        """Whether the reducer rebuilds its buckets in ready order (Reducer::should_rebuild_buckets)."""
        return self.static_graph or not self.find_unused_parameters


def ddp_limits(opts) -> list[int]:
    """``[first_bucket_bytes, bucket_cap]`` as DistributedDataParallel computes them.

    torch >= 2.13 uses the 1 MiB first bucket only while ``bucket_cap_mb`` is left at its
    default; an explicit ``bucket_cap_mb`` makes the first bucket that size too. Pass
    ``first_bucket_bytes`` to model other versions (older torch: always 1 MiB).
    """
    cap = opts.max_bytes if opts.max_bytes is not None else DDP_BUCKET_CAP
    first = opts.first_bucket_bytes
    if first is None:
        first = DDP_FIRST_BUCKET_BYTES if opts.max_bytes is None else cap
    return [first, cap] if first < cap else [cap]


def ddp_buckets(nbytes: Sequence[int], dtypes: Sequence[str], limits: Sequence[int],
                sparse: Optional[Sequence[bool]] = None) -> list[tuple[int, ...]]:
    """PyTorch's ``compute_bucket_assignment_by_size`` (reducer.cpp) on tensors given in
    gradient-ready order, as DDP's bucket rebuild calls it.

    One accumulator per dtype; a bucket closes when its size reaches its limit, and each
    dtype then moves on to the next limit (the last one repeats). A tensor expected to get a
    sparse gradient (``expect_sparse_gradient``) gets a bucket of its own at once. The
    buckets still open come last, in the order torch's ``unordered_map`` of accumulators
    yields them: the reverse of each dtype's first appearance (checked against torch on
    thousands of cases of every gradient dtype; with ``tensor_indices`` given, as at the
    rebuild, torch does not re-sort).

    >>> MiB = 1 << 20
    >>> ddp_buckets([1024, 4 * MiB, 20 * MiB, 10 * MiB, 3 * MiB // 4, MiB // 2], ["float32"] * 6,
    ...             [MiB, 25 * MiB])
    [(0, 1), (2, 3), (4, 5)]
    """
    result: list[tuple[int, ...]] = []
    open_: dict[str, list[int]] = {}  # insertion order: each dtype's first appearance
    sizes: dict[str, int] = {}
    limit_index: dict[str, int] = {}
    for i, (n, dtype) in enumerate(zip(nbytes, dtypes)):
        if sparse is not None and sparse[i]:
            result.append((i,))
            continue
        bucket = open_.setdefault(dtype, [])
        bucket.append(i)
        sizes[dtype] = sizes.get(dtype, 0) + n
        k = limit_index.setdefault(dtype, 0)
        if sizes[dtype] >= limits[k]:
            result.append(tuple(bucket))
            open_[dtype], sizes[dtype] = [], 0
            limit_index[dtype] = min(k + 1, len(limits) - 1)
    return result + [tuple(b) for b in reversed(open_.values()) if b]


def ddp(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """DDP's buckets as its mode makes them: rebuilt in ready order; a sparse gradient
    (``nn.Embedding(sparse=True)``) alone."""
    alone = sparse_alone(grads, opts)
    params = [p for p in opts.params if p.grad is not None or opts.find_unused_parameters
              or opts.static_graph]
    if not opts.rebuilt or (params and any(p.grad is None for p in params)):
        return _with_params(grads, opts, params or _params_of(grads, alone), alone)
    buckets = ddp_buckets([g.nbytes for g in grads], [g.dtype for g in grads], ddp_limits(opts),
                          [i in alone for i in range(len(grads))] if alone else None)
    return Grouping(buckets, collectives=collectives_of(buckets, alone), notes=_units(opts))


def _units(opts) -> tuple[str, ...]:
    """What a cap typed in decimal units (25MB = 25,000,000 bytes) means to DDP, whose
    ``bucket_cap_mb`` counts MiB (2^20 bytes)."""
    cap = opts.max_bytes
    if cap is None or cap % 1000 or not cap % 1024:
        return ()
    number, unit, power = (cap // 10**6, "M", 2) if not cap % 10**6 else (cap // 1000, "K", 1)
    return (f"--max-bytes {number}{unit}B is {cap:,} bytes, DDP's "
            f"bucket_cap_mb={mib_text(cap)}: DDP's MB are MiB (2^20 bytes); --max-bytes "
            f"{number}{unit}iB is bucket_cap_mb={mib_text(number * 1024 ** power)}",)


def _params_of(grads: Sequence[Grad], alone) -> list:
    """The parameters in definition order where no sidecar gave them: the gradients by
    their place in the variable order."""
    from .ddp_modes import Param

    return [Param(grads[i].name, grads[i].nbytes, grads[i].dtype, i, i in alone)
            for i in sorted(range(len(grads)), key=lambda i: grads[i].order)]


def _with_params(grads: Sequence[Grad], opts, params, alone) -> Grouping:
    """The construction buckets (``find_unused_parameters``) or the static graph's rebuild,
    over every parameter: a bucket's message holds the elements of those without a gradient
    (zeros, all-reduced all the same); a bucket of those alone is ready at the first hook."""
    limits = ddp_limits(opts)
    if opts.rebuilt:  # static_graph: ready order, the parameters without a gradient last
        order = static_graph_order(params, len(grads))
        found = ddp_buckets([params[k].nbytes for k in order], [params[k].dtype for k in order],
                            limits, [params[k].sparse for k in order])
        slots = [[order[k] for k in b] for b in found]
    else:
        slots = construction_buckets(params, limits, ddp_buckets)
    first = min((g.ready_ms for g in grads), default=0.0)
    buckets, messages, not_before = [], [], []
    for slot in slots:
        members = tuple(sorted(params[k].grad for k in slot if params[k].grad is not None))
        buckets.append(members)
        messages.append((sum(params[k].nbytes for k in slot), params[slot[0]].dtype))
        not_before.append(first)
    lone = {i for i in alone if (i,) in buckets}
    notes = () if opts.rebuilt else (
        f"find_unused_parameters=True: DDP also all-reduces an int32 map of its {len(params)} "
        f"parameters ({4 * len(params)} bytes) after the last bucket, every step; not a "
        "gradient bucket and not in this plan",)
    return Grouping(buckets, not_before, collectives_of(buckets, lone), messages, notes + _units(opts))


def ddp_settings(plan) -> dict[str, Any]:
    """``DistributedDataParallel(model, bucket_cap_mb=...)`` for the plan's options (with
    its mode where that is not the default)."""
    o = plan.options
    first, *rest = ddp_limits(o)
    cap = rest[0] if rest else first
    mode = "".join(f", {k}=True" for k in ("find_unused_parameters", "static_graph") if getattr(o, k))
    text = f"DistributedDataParallel(model, bucket_cap_mb={mib_text(cap)}{mode})"
    if o.max_bytes is None:
        text = (f"DistributedDataParallel(model{mode})  # defaults: bucket_cap_mb=25, first "
                "bucket 1 MiB")
    doc = {"framework": "pytorch-ddp", "bucket_cap_mb": cap / MiB, "first_bucket_bytes": first,
           "text": text}
    if mode:
        doc.update(find_unused_parameters=o.find_unused_parameters, static_graph=o.static_graph)
    return doc


def ddp_tuning(inp, options):
    """Every candidate ``bucket_cap_mb`` (the first bucket as torch makes it then); with
    ``find_unused_parameters=True`` where every parameter had a gradient, the rebuild that
    turning it off gives too."""
    modes = [options]
    if options.find_unused_parameters and not options.static_graph and \
            all(p.grad is not None for p in options.params):
        modes.append(replace(options, find_unused_parameters=False))
    for mode in modes:
        for cap in cap_candidates(inp.grads):
            yield replace(mode, max_bytes=cap, first_bucket_bytes=None)


def ddp_inputs(options, inp):
    """The model's parameters where the planner's input has them (a sidecar named them)."""
    return replace(options, params=inp.params) if inp.params and not options.params else options


SPEC = StrategySpec("ddp", ddp, DdpOptions, ddp_settings, ddp_tuning, "PyTorch DDP",
                    defaults=(MAX_BYTES, FIRST_BUCKET_BYTES), frameworks=("pytorch",),
                    setup=(FIND_UNUSED, STATIC_GRAPH), inputs=ddp_inputs)
