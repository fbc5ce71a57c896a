"""A noise model per collective and per rank: when lateness is a straggler's and when jitter.

Each collective of a step has a **slot**: its process group, its kind and its place in that
group's launch order within the step (a send or recv: its sender, receiver and place), the
same collective in every step. In a collective, the last rank's **lateness** is the gap
between the last two arrivals (:mod:`.times`).

The last rank's lateness is held to a threshold made from the run's other steps (never from
the step judged, so that a straggler cannot raise its own bar), the largest of:

- ``FLOOR_MS``;
- the run's jitter: ``center + K * spread`` of every collective's lateness in the other
  steps (median; 1.4826 x the median absolute deviation);
- this collective's own lateness, structural where it is high (a pipeline's recv waiting for
  the stage before it): ``SLOT_FACTOR`` x its median in the other steps;
- this rank's own lateness here, where it is habitually late by a steady amount (a rank that
  is slow, which ``last_counts`` shows, not a straggler of one step): ``SLOT_FACTOR`` x its
  median in the other steps (0 where it was not last).

A collective past its threshold is **flagged**, and left out of the samples; thresholds are
made again until no more are flagged (so two stragglers in two steps do not hide each
other). A step's straggler is then the rank charged most among those with a flagged
collective in it (:mod:`.analyze`). The JSON gives each collective's threshold.

A run of one step has no other steps: its samples are the step's other collectives.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Optional, Sequence

from .times import CollectiveTimes

__all__ = ["slots", "thresholds", "limit_of", "FLOOR_MS", "K", "SLOT_FACTOR", "MAX_ROUNDS"]

FLOOR_MS = 1.0
K = 15.0
SLOT_FACTOR = 4.0
MAX_ROUNDS = 8


def slots(times: Sequence[CollectiveTimes]) -> list[tuple]:
    """Each collective's slot: (group, kind, place in its group's order in its step)."""
    counters: dict = defaultdict(int)
    out = []
    for t in times:
        m = t.matched
        kind = m.first.kind
        if kind.point_to_point:
            ranks = sorted(m.by_rank, key=lambda r: m.by_rank[r].kind.value != "send")
            base = ("p2p",) + tuple(ranks)
        else:
            base = (m.group, kind.value)
        key = (m.step, base)
        out.append(base + (counters[key],))
        counters[key] += 1
    return out


def limit_of(sample: list[float]) -> Optional[float]:
    """``median + K * 1.4826 * MAD`` of ``sample``; ``None`` when it is empty."""
    if not sample:
        return None
    mid = statistics.median(sample)
    mad = statistics.median(abs(v - mid) for v in sample)
    return mid + K * 1.4826 * mad


def _threshold(k: int, times: Sequence[CollectiveTimes], same_slot: list[int],
               used: list[bool]) -> float:
    t = times[k]
    step = t.matched.step
    others = [i for i in same_slot if times[i].matched.step != step and used[i]]
    pool = [i for i, o in enumerate(times) if used[i] and o.last is not None
            and o.matched.step != step]
    if not others and not pool:  # one step: the step's other collectives
        pool = [i for i, o in enumerate(times) if i != k and used[i] and o.last is not None]
    limits = [FLOOR_MS, limit_of([times[i].lateness_ms for i in pool]) or 0.0]
    if others:
        limits.append(SLOT_FACTOR * statistics.median(times[i].lateness_ms for i in others))
        limits.append(SLOT_FACTOR * statistics.median(
            times[i].lateness_ms if times[i].last == t.last else 0.0 for i in others))
    return max(limits)


def thresholds(times: Sequence[CollectiveTimes]) -> list[Optional[float]]:
    """Each collective's threshold for its last rank's lateness (``None`` without one)."""
    keys = slots(times)
    by_slot: dict[tuple, list[int]] = defaultdict(list)
    for k, key in enumerate(keys):
        if times[k].last is not None:
            by_slot[key].append(k)
    used = [t.last is not None for t in times]
    out: list[Optional[float]] = [None] * len(times)
    for _ in range(MAX_ROUNDS):
        for k, t in enumerate(times):
            if t.last is not None:
                out[k] = _threshold(k, times, by_slot[keys[k]], used)
        kept = [u and t.lateness_ms <= out[k] for k, (u, t) in enumerate(zip(used, times))]
        if kept == used:
            break
        used = kept
    return out
