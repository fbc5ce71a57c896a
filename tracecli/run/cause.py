"""Why the straggler was late: its ops that took longer than the same ops on the other ranks.

For the late rank's step, each of its ops (:mod:`.stepops`: forward, backward, optimizer,
data loading, collective launches, untraced host time) is set against the same op (same name
and occurrence) on every other rank in the same step: the time it **added** is its duration
minus the median of theirs (an op the others did not run counts 0 there). Ops are ranked by
the time they added; those under :data:`MIN_ADDED_MS` are not listed. A compute straggler
inside backward, invisible in step times (DDP's all-reduces equalise them), shows here as
the backward op that ran long.
"""

from __future__ import annotations

import statistics
from typing import Mapping, NamedTuple

from .extract import RankStep

__all__ = ["SlowOp", "slow_ops", "MIN_ADDED_MS", "TOP"]

MIN_ADDED_MS = 0.1
TOP = 8


class SlowOp(NamedTuple):
    op: str  # "NAME #K": the K-th op of that name in the step
    kind: str  # forward, backward, optimizer, data, collective, other, untraced
    ms: float  # on the late rank
    others_ms: float  # the median of the other ranks
    added_ms: float


def slow_ops(steps: Mapping[int, RankStep], late: int) -> list[SlowOp]:
    """The late rank's ops in one step (``steps``: each rank's record of it) ranked by the
    time they added over the others'."""
    mine, theirs = None, []
    for rank, s in steps.items():
        if s.ops is None:
            continue
        if rank == late:
            mine = s.ops
        else:
            theirs.append(s.ops.by_key())
    if mine is None or not theirs:
        return []
    found = []
    for key, kind, ms in zip(mine.keys, mine.kinds, mine.ms):
        others = statistics.median(t.get(key, 0.0) for t in theirs)
        added = ms - others
        if added >= MIN_ADDED_MS:
            found.append(SlowOp(key, kind, ms, others, added))
    found.sort(key=lambda o: (-o.added_ms, o.op))
    return found[:TOP]
