"""Bucket strategies (DESIGN 4.4): a name -> function registry with one small signature.

Each strategy maps the gradients, in readiness order, to buckets: tuples of indices into
that order. Strategies that name a real system reproduce its grouping exactly:

- ``per-tensor``: one all-reduce per gradient (Detectron; wait-free backprop).
- ``single``: one bucket after backward (tower averaging, Ray's LocalSyncParallelOptimizer).
- ``size``: greedy, close once size >= cap (the crossing tensor included).
- ``ddp``: PyTorch DDP's ``compute_bucket_assignment_by_size`` after the bucket rebuild.
- ``horovod``: Horovod's ``Controller::FuseResponses`` within each cycle.
- ``tf-spec``: tf_cnn_benchmarks' ``--all_reduce_spec`` parts and ``pack_small_tensors``.
- ``optimal``: the exact best contiguous partition (see :mod:`.optimal`).
"""

from __future__ import annotations

import math
import re
from collections import deque
from typing import NamedTuple, Optional, Sequence

from ..errors import PlanError
from .base import DEFAULT_MAX_BYTES, DDP_BUCKET_CAP, DDP_FIRST_BUCKET_BYTES, HOROVOD_THRESHOLD
from .base import Grad, Grouping, Strategy, StrategyOptions, collectives_of, sparse_alone
from .optimal import optimal

__all__ = [
    "Grad", "StrategyOptions", "Grouping", "STRATEGIES", "DEFAULT_MAX_BYTES",
    "DDP_FIRST_BUCKET_BYTES", "DDP_BUCKET_CAP", "HOROVOD_THRESHOLD",
    "ddp_buckets", "horovod_fuse", "parse_all_reduce_spec", "pack_small_tensors",
    "extract_ranges", "SpecPart",
]

def per_tensor(grads: Sequence[Grad], opts: StrategyOptions) -> Grouping:
    """One collective per gradient, in readiness order (a sparse one all-gathered)."""
    buckets = [(i,) for i in range(len(grads))]
    return Grouping(buckets, collectives=collectives_of(buckets, sparse_alone(grads, opts)))


def single(grads: Sequence[Grad], opts: StrategyOptions) -> Grouping:
    """Everything in one bucket, reduced once backward has produced the last gradient."""
    return Grouping([tuple(range(len(grads)))] if grads else [])


def size_greedy(grads: Sequence[Grad], opts: StrategyOptions) -> Grouping:
    """Greedy in readiness order: a bucket closes once its size reaches the cap.

    >>> g = [Grad(str(i), n, "float32", n // 4, 0.0, i) for i, n in enumerate([4, 4, 12, 4])]
    >>> size_greedy(g, StrategyOptions(max_bytes=8)).buckets
    [(0, 1), (2,), (3,)]
    """
    cap = opts.max_bytes if opts.max_bytes is not None else DEFAULT_MAX_BYTES["size"]
    buckets, current, size = [], [], 0
    for i, g in enumerate(grads):
        current.append(i)
        size += g.nbytes
        if size >= cap:
            buckets.append(tuple(current))
            current, size = [], 0
    if current:
        buckets.append(tuple(current))
    return Grouping(buckets)


def ddp_limits(opts: StrategyOptions) -> list[int]:
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


def ddp(grads: Sequence[Grad], opts: StrategyOptions) -> Grouping:
    """DDP's rebuilt buckets; a sparse gradient (``nn.Embedding(sparse=True)``) alone."""
    alone = sparse_alone(grads, opts)
    buckets = ddp_buckets([g.nbytes for g in grads], [g.dtype for g in grads], ddp_limits(opts),
                          [i in alone for i in range(len(grads))] if alone else None)
    return Grouping(buckets, collectives=collectives_of(buckets, alone))


def horovod_fuse(nbytes: Sequence[int], dtypes: Sequence[str], threshold: int) -> list[tuple[int, ...]]:
    """Horovod's ``Controller::FuseResponses`` on one cycle's responses, in order.

    The first tensor is always taken; a later one joins while the fused size stays
    <= threshold and its dtype matches; one that does not fit is skipped (look-ahead) while
    the fused size plus everything skipped stays <= threshold, and goes to a later group.

    >>> horovod_fuse([10, 20, 30, 40], ["float32"] * 4, 60)
    [(0, 1, 2), (3,)]
    >>> horovod_fuse([10, 20, 30, 40], ["float32", "float16", "float32", "float32"], 60)
    [(0, 2), (1,), (3,)]
    """
    queue = deque(range(len(nbytes)))
    groups = []
    while queue:
        first = queue.popleft()
        group, size = [first], nbytes[first]
        skipped: list[int] = []
        skipped_size = 0
        while queue:
            nxt = queue[0]
            if dtypes[nxt] == dtypes[first] and size + nbytes[nxt] <= threshold:
                size += nbytes[nxt]
                group.append(queue.popleft())
            else:
                skipped_size += nbytes[nxt]
                if size + skipped_size <= threshold:
                    skipped.append(queue.popleft())
                else:
                    break
        queue.extendleft(reversed(skipped))
        groups.append(tuple(group))
    return groups


def horovod(grads: Sequence[Grad], opts: StrategyOptions) -> Grouping:
    """Fusion per cycle: gradients ready in the same ``cycle_ms`` window (counted from the
    step's start) are fused; the fused all-reduce can start at the end of that cycle.
    Sparse gradients (``IndexedSlices``) are all-gathered, each on its own, unless
    ``sparse_as_dense``."""
    if opts.cycle_ms <= 0:
        raise PlanError(None, None, "--cycle-ms must be positive")
    threshold = opts.max_bytes if opts.max_bytes is not None else HOROVOD_THRESHOLD
    alone = sparse_alone(grads, opts)
    buckets: list[tuple[int, ...]] = []
    not_before: list[float] = []
    i = 0
    while i < len(grads):
        cycle = math.floor(grads[i].ready_ms / opts.cycle_ms)
        j = i
        while j < len(grads) and math.floor(grads[j].ready_ms / opts.cycle_ms) == cycle:
            j += 1
        members = [k for k in range(i, j) if k not in alone]
        groups = [tuple(members[k] for k in group) for group in horovod_fuse(
            [grads[k].nbytes for k in members], [grads[k].dtype for k in members], threshold)]
        groups += [(k,) for k in range(i, j) if k in alone]
        for group in sorted(groups, key=lambda g: g[0]):
            buckets.append(group)
            not_before.append((cycle + 1) * opts.cycle_ms)
        i = j
    return Grouping(buckets, not_before, collectives_of(buckets, alone))


class SpecPart(NamedTuple):
    alg: str
    shards: int
    limit: int  # element count; -1 for the last part


_SPEC_ALGS = ("nccl", "nccl/xring", "nccl/rechd", "nccl/pscpu", "xring", "pscpu", "psgpu",
              "pscpu/pscpu", "collective")


def _general_int(text: str, spec: str) -> int:
    match = re.fullmatch(r"(\d+)([KkMGT]?)", text)
    if not match:
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        raise PlanError(None, None, f"all-reduce spec {spec!r} has a non-integer range "
                        f"{text!r}; limits are element counts with k/K, M, G, T suffixes")
    scale = {"": 1, "k": 1024, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    return int(match.group(1)) * scale[match.group(2)]


def parse_all_reduce_spec(spec: str) -> list[SpecPart]:
    """tf_cnn_benchmarks' ``parse_all_reduce_spec``: ``alg[#shards](:limit:alg[#shards])*``.

    >>> parse_all_reduce_spec("pscpu:32k:xring")
    [SpecPart(alg='pscpu', shards=1, limit=32768), SpecPart(alg='xring', shards=1, limit=-1)]
    >>> parse_all_reduce_spec("nccl#2")
    [SpecPart(alg='nccl', shards=2, limit=-1)]
    """
    parts = spec.split(":") + ["-1"]
    if len(parts) % 2:
        raise PlanError(None, None, f"all-reduce spec {spec!r} is malformed: it needs "
                        "alg(:limit:alg)*, e.g. pscpu:32k:xring")
    result = []
    alg, shards = "", 1
    for i, part in enumerate(parts):
        if i % 2:
            result.append(SpecPart(alg, shards, _general_int(part, spec)))
            continue
        alg, _, shard_text = part.partition("#")
        shards = 1
        if shard_text:
            if not shard_text.isdigit():
                raise PlanError(None, None, f"all-reduce spec {spec!r} has non-integer "
                                f"shards {shard_text!r}")
            shards = int(shard_text)
        if alg not in _SPEC_ALGS:
            raise PlanError(None, None, f"all-reduce spec {spec!r} has invalid alg {alg!r}; "
                            "use one of " + ", ".join(_SPEC_ALGS))
    return result


def extract_ranges(indices: Sequence[int], range_size_limit: int) -> tuple[list[list[int]], list[int]]:
    """tf_cnn_benchmarks' ``extract_ranges``: consecutive runs and singles."""
    if not indices:
        return [], []
    first = last = indices[0]
    ranges, singles = [], []
    for i in indices[1:]:
        if i == last + 1 and (last - first) <= range_size_limit:
            last = i
        else:
            if last > first:
                ranges.append([first, last])
            else:
                singles.append(first)
            first = last = i
    if last > first:
        ranges.append([first, last])
    else:
        singles.append(first)
    return ranges, singles


def pack_small_tensors(elements: Sequence[int], dtypes: Sequence[str], max_bytes: int,
                       max_group: int) -> list[tuple[int, ...]]:
    """tf_cnn_benchmarks' ``pack_small_tensors``: groups of positions, packed ranges first.

    >>> pack_small_tensors([8, 9, 12, 125], ["float32"] * 4, 40, 10)
    [(0, 1), (2,), (3,)]
    >>> pack_small_tensors([125, 6, 5, 7, 100], ["float32"] * 5, 40, 10)
    [(1, 2, 3), (0,), (4,)]
    """
    if max_bytes <= 0 or max_group <= 0:
        return [(i,) for i in range(len(elements))]
    small = [i for i, (n, d) in enumerate(zip(elements, dtypes)) if d == "float32" and 4 * n <= max_bytes]
    large = [i for i, (n, d) in enumerate(zip(elements, dtypes)) if not (d == "float32" and 4 * n <= max_bytes)]
    ranges, singles = extract_ranges(small, max_group)
    if not ranges:
        return [(i,) for i in range(len(elements))]
    return [tuple(range(a, b + 1)) for a, b in ranges] + [(i,) for i in sorted(large + singles)]


def tf_spec(grads: Sequence[Grad], opts: StrategyOptions) -> Grouping:
    """Spec parts split the gradients (in variable order) by element count; within each part
    small float32 gradients are packed. Each group is one all-reduce, launched when its
    last gradient is ready, as TensorFlow's dataflow runs it."""
    spec = parse_all_reduce_spec(opts.spec)
    remaining = sorted(range(len(grads)), key=lambda i: grads[i].order)
    groups: list[tuple[int, ...]] = []
    for part in spec:
        if part.limit < 0:
            this, remaining = remaining, []
        else:
            this = [i for i in remaining if grads[i].elements <= part.limit]
            remaining = [i for i in remaining if grads[i].elements > part.limit]
        packed = pack_small_tensors([grads[i].elements for i in this],
                                    [grads[i].dtype for i in this],
                                    opts.agg_small_grads_max_bytes, opts.agg_small_grads_max_group)
        groups += [tuple(sorted(this[k] for k in group)) for group in packed]
    groups.sort(key=lambda g: (max(g), g))
    return Grouping(groups)


STRATEGIES: dict[str, Strategy] = {
    "per-tensor": per_tensor,
    "single": single,
    "size": size_greedy,
    "ddp": ddp,
    "horovod": horovod,
    "tf-spec": tf_spec,
    "optimal": optimal,
}
