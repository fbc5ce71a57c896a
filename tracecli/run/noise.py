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

A run of one step has no other steps: its samples are then all its collectives (and the
slot and rank samples are empty); past :data:`LEAVE_ONE_OUT_STEPS` steps, the samples hold
every step (one step's share of a median over so many is negligible, and leaving each out
in turn would cost the square of the run's collectives).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Optional, Sequence

from .times import CollectiveTimes

__all__ = ["slots", "thresholds", "limit_of", "FLOOR_MS", "K", "SLOT_FACTOR", "MAX_ROUNDS",
           "LEAVE_ONE_OUT_STEPS"]

FLOOR_MS = 1.0
K = 15.0
SLOT_FACTOR = 4.0
MAX_ROUNDS = 8
LEAVE_ONE_OUT_STEPS = 16  # past this many steps, one step's share of a median is negligible


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


def _round(times: Sequence[CollectiveTimes], keys: list[tuple],
           used: list[bool]) -> list[Optional[float]]:
    """Every collective's threshold from the samples ``used`` leaves in."""
    steps = {t.matched.step for t in times}
    every = len(steps) == 1 or len(steps) > LEAVE_ONE_OUT_STEPS  # no step left out
    values: list[float] = []
    by_step: dict = defaultdict(list)
    by_slot: dict = defaultdict(list)
    for k, t in enumerate(times):
        if used[k]:
            values.append(t.lateness_ms)
            by_step[t.matched.step].append(t.lateness_ms)
            by_slot[keys[k]].append((t.matched.step, t.lateness_ms, t.last))
    pooled = {}
    for step in steps:
        if every:
            pooled[step] = limit_of(values)
        else:
            mine = sorted(by_step.get(step, ()))
            pooled[step] = limit_of(_without(sorted(values), mine))
    out: list[Optional[float]] = []
    for k, t in enumerate(times):
        if t.last is None:
            out.append(None)
            continue
        step = t.matched.step
        others = [e for e in by_slot.get(keys[k], ()) if every or e[0] != step]
        limits = [FLOOR_MS, pooled.get(step) or 0.0]
        if others and len(steps) > 1:
            limits.append(SLOT_FACTOR * statistics.median(e[1] for e in others))
            limits.append(SLOT_FACTOR * statistics.median(e[1] if e[2] == t.last else 0.0
                                                          for e in others))
        out.append(max(limits))
    return out


def _without(values: list[float], remove: list[float]) -> list[float]:
    """Sorted ``values`` less the (sorted) ``remove``, each once."""
    out, j = [], 0
    for v in values:
        if j < len(remove) and v == remove[j]:
            j += 1
            continue
        out.append(v)
    return out


def thresholds(times: Sequence[CollectiveTimes]) -> list[Optional[float]]:
    """Each collective's threshold for its last rank's lateness (``None`` without one)."""
    keys = slots(times)
    used = [t.last is not None for t in times]
    out: list[Optional[float]] = [None] * len(times)
    for _ in range(MAX_ROUNDS):
        out = _round(times, keys, used)
        kept = [u and t.lateness_ms <= out[k] for k, (u, t) in enumerate(zip(used, times))]
        if kept == used:
            break
        used = kept
    return out
