"""``horovod``: Horovod's ``Controller::FuseResponses`` within each cycle, its
``HOROVOD_FUSION_THRESHOLD``/``HOROVOD_CYCLE_TIME`` settings and its tuning grid."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from ..base import HOROVOD_THRESHOLD, Grad, Grouping, collectives_of, sparse_alone
from ..spec import MAX_BYTES, SPARSE_AS_DENSE, Kind, Knob, Options, StrategySpec, cap_candidates

__all__ = ["horovod", "horovod_fuse", "horovod_settings", "horovod_tuning", "CYCLE_MS", "SPEC",
           "HorovodOptions"]

CYCLE_MS = Knob("cycle_ms", "--cycle-ms", Kind.MS, 1.0, "horovod: HOROVOD_CYCLE_TIME, ms.")


@dataclass(frozen=True)
class HorovodOptions(Options):
    max_bytes: Optional[int] = MAX_BYTES.field()  # HOROVOD_FUSION_THRESHOLD
    cycle_ms: float = CYCLE_MS.field()  # HOROVOD_CYCLE_TIME
    sparse_as_dense: bool = SPARSE_AS_DENSE.field()

    @property
    def threshold(self) -> int:
        """``HOROVOD_FUSION_THRESHOLD``: ``max_bytes``, else Horovod's default."""
        return self.max_bytes if self.max_bytes is not None else HOROVOD_THRESHOLD


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


def horovod(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """Fusion per cycle: gradients ready in the same ``cycle_ms`` window (counted from the
    step's start) are fused; the fused all-reduce can start at the end of that cycle.
    Sparse gradients (``IndexedSlices``) are all-gathered, each on its own, unless
    ``sparse_as_dense``."""
    threshold = opts.threshold
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


def horovod_settings(plan) -> dict[str, Any]:
    """``export HOROVOD_FUSION_THRESHOLD=... HOROVOD_CYCLE_TIME=...`` (and the tape's
    ``sparse_as_dense`` when it matters)."""
    o = plan.options
    threshold = o.threshold
    text = f"export HOROVOD_FUSION_THRESHOLD={threshold} HOROVOD_CYCLE_TIME={o.cycle_ms:g}"
    if o.sparse_as_dense and any(g.sparse for g in plan.inp.grads):
        text += "  # and hvd.DistributedGradientTape(tape, sparse_as_dense=True)"
    return {"framework": "horovod", "HOROVOD_FUSION_THRESHOLD": threshold,
            "HOROVOD_CYCLE_TIME": o.cycle_ms, "sparse_as_dense": o.sparse_as_dense,
            "text": text}


def horovod_tuning(inp, options):
    """Every candidate threshold x cycle times around the backward pass's length (x
    ``sparse_as_dense`` both ways when a gradient is sparse)."""
    caps = cap_candidates(inp.grads)
    backward = inp.backward_end_ms - inp.forward_ms
    cycles = sorted({0.1, 0.5, 1.0, 2.0, 5.0} | {round(backward / k, 3) for k in (1, 2, 4, 8, 16, 32)
                                                 if backward / k >= 0.1})
    dense = (False, True) if any(g.sparse for g in inp.grads) else (options.sparse_as_dense,)
    for c in caps:
        for cy in cycles:
            for d in dense:
                yield replace(options, max_bytes=c, cycle_ms=cy, sparse_as_dense=d)


SPEC = StrategySpec("horovod", horovod, HorovodOptions, horovod_settings, horovod_tuning,
                    "Horovod", defaults=(MAX_BYTES, CYCLE_MS), frameworks=("horovod",))
