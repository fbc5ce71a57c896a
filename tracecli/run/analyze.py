"""A run's report: each collective's wait and transfer, clock offsets, stragglers and why.

Per collective, wait against transfer (:mod:`.times`); clock offsets from every
synchronising collective (:mod:`.offsets`); per step and rank: its step time, the time with
no collective running on it (``compute_ms``), the sums of its waits and transfers, its busy
compute and its exposed communication (:mod:`.stepops`). A collective's lateness is charged
to the rank that arrived last; a step's **straggler** is the rank charged most among those
whose lateness passed its collective's threshold (:mod:`.noise`), and ``lost_ms`` is its
charge (overlapping lateness once). Where a group's member has no trace, what it cost shows
as the present ranks' transfer running long against the same collective in other steps: a
step whose only flagged lateness is that names the missing rank (``straggler_missing``).
For a present straggler, :mod:`.cause` ranks its ops by the time they added.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import NamedTuple, Optional

from .cause import SlowOp, slow_ops
from .load import Run
from .match import Matching
from .noise import FLOOR_MS, SLOT_FACTOR, slots, thresholds
from .notes import run_notes
from .offsets import Offsets, offsets
from .spans import covered, covered_within
from .times import CollectiveTimes, arrival_ms, times_of

__all__ = ["CollectiveTimes", "RankStepTimes", "StepReport", "RunReport", "analyze"]


class RankStepTimes(NamedTuple):
    step_ms: float
    compute_ms: float  # the step's time with no collective running on the rank
    wait_ms: float
    transfer_ms: float
    busy_ms: Optional[float]  # its compute ops (kernels on a GPU), overlaps once
    exposed_ms: Optional[float]  # collective time with no compute running


class StepReport(NamedTuple):
    step: Optional[int]
    label: str
    straggler: Optional[int]
    lost_ms: float
    noise_ms: Optional[float]  # the threshold the straggler (or the nearest) was held to
    ranks: dict[int, RankStepTimes]
    charged_ms: dict[int, float]  # lateness charged to each rank
    straggler_missing: bool = False  # the straggler is a rank with no trace in the run
    why: tuple[SlowOp, ...] = ()


class RunReport(NamedTuple):
    run: Run
    matching: Matching
    collectives: tuple[CollectiveTimes, ...]
    thresholds: tuple[Optional[float], ...]  # each collective's, for its last rank
    steps: tuple[StepReport, ...]
    offsets: Offsets
    last_counts: dict[int, int]
    notes: tuple[str, ...]

    @property
    def ranks(self) -> list[int]:
        return [r.rank for r in self.run.ranks]

    @property
    def clock_offset_us(self) -> dict[int, float]:
        return self.offsets.offset_us

    @property
    def clock_spread_us(self) -> dict[int, Optional[float]]:
        return self.offsets.spread_us

    @property
    def offsets_from(self) -> int:
        return self.offsets.collectives

    @property
    def missing_ranks(self) -> tuple[int, ...]:
        world = self.run.world_size
        have = set(self.ranks)
        return tuple(r for r in range(world) if r not in have) if world else ()


class _Index:
    """The run's records by step, built once: each rank's step and its collectives, and
    each slot's transfers."""

    def __init__(self, run: Run, times: list[CollectiveTimes], keys: list[tuple]):
        self.steps: dict = defaultdict(dict)  # step -> rank -> RankStep
        self.collectives: dict = defaultdict(lambda: defaultdict(list))  # step -> rank -> [c]
        for r in run.ranks:
            for s in r.steps:
                self.steps[s.index][r.rank] = s
            for c in r.collectives:
                self.collectives[c.step][r.rank].append(c)
        self.transfers: dict = defaultdict(list)  # slot -> [(step, transfer)]
        for t, key in zip(times, keys):
            if t.transfer_ms is not None:
                self.transfers[key].append((t.matched.step, t.transfer_ms))


def _rank_times(index: _Index, step_index, times: list[CollectiveTimes]) -> dict[int, RankStepTimes]:
    per = {}
    for rank, s in index.steps[step_index].items():
        step_ms = (s.end - s.ts) / 1000.0
        spans = [(a, c.end_ms) for c in index.collectives[step_index][rank]
                 if (a := arrival_ms(c)) is not None and c.end_ms is not None]
        waits = [(a, a + t.wait_ms[rank]) for t in times if t.transfer_ms is not None
                 and (c := t.matched.by_rank.get(rank)) and (a := arrival_ms(c)) is not None]
        busy, wait = covered_within(spans, 0.0, step_ms), covered_within(waits, 0.0, step_ms)
        ops = s.ops
        per[rank] = RankStepTimes(step_ms, step_ms - busy, wait, busy - wait,
                                  ops.compute_ms if ops else None, ops.exposed_ms if ops else None)
    return per


def _charged(times: list[CollectiveTimes], flags: list[bool]) -> tuple[dict, set]:
    """Lateness charged to each last rank (on its own clock: from when the rank before it
    arrived to when it did; overlapping ones once), and the ranks with a flagged one."""
    late: dict[int, list] = defaultdict(list)
    flagged = set()
    for t, flag in zip(times, flags):
        if t.last is not None and t.lateness_ms > 0:
            end = t.matched.by_rank[t.last].end_ms
            late[t.last].append((end - t.transfer_ms - t.lateness_ms, end - t.transfer_ms))
            if flag:
                flagged.add(t.last)
    return {r: covered(spans) for r, spans in late.items()}, flagged


def _missing_cost(index: _Index, mine: list[CollectiveTimes], keys: list[tuple],
                  limits: list[Optional[float]], step) -> tuple[float, Optional[float]]:
    """What ranks without a trace cost ``step``: its incomplete collectives whose transfer
    ran past :data:`~.noise.SLOT_FACTOR` times the same collective's median in the other
    steps by more than its lateness threshold (the wait the present ranks shared, as a
    late present rank's would be), overlaps once; and the threshold used."""
    spans, used = [], None
    for t, key, limit in zip(mine, keys, limits):
        if t.complete or t.transfer_ms is None:
            continue
        others = [ms for s, ms in index.transfers[key] if s != step]
        if not others:
            continue
        base = statistics.median(others)
        bar = max(limit or FLOOR_MS, FLOOR_MS)
        if t.transfer_ms <= SLOT_FACTOR * base or t.transfer_ms - base <= bar:
            continue
        end = t.matched.first.end_ms
        spans.append((end - t.transfer_ms, end - base))
        used = bar if used is None else min(used, bar)
    return covered(spans), used


def _step_report(index: _Index, ref, mine: list[CollectiveTimes], limits: list[Optional[float]],
                 keys: list[tuple]) -> StepReport:
    flags = [lim is not None and t.lateness_ms > lim for t, lim in zip(mine, limits)]
    charged, flagged = _charged(mine, flags)
    straggler, lost, noise, missing = None, 0.0, None, False
    if flagged:
        straggler = max(sorted(flagged), key=lambda r: charged.get(r, 0.0))
        lost = charged.get(straggler, 0.0)
        noise = max(lim for t, lim, f in zip(mine, limits, flags) if f and t.last == straggler)
    elif any(lim is not None for lim in limits):
        nearest = max((t.lateness_ms / lim, lim) for t, lim in zip(mine, limits) if lim)
        noise = nearest[1]
    absent = sorted({r for t in mine for r in t.matched.missing})
    if absent:
        cost, limit = _missing_cost(index, mine, keys, limits, ref.index)
        if cost > lost:
            straggler, lost, noise, missing = absent[0], cost, limit, True
    why = ()
    if straggler is not None and not missing:
        why = tuple(slow_ops(index.steps[ref.index], straggler))
    return StepReport(ref.index, ref.label, straggler, lost, noise,
                      _rank_times(index, ref.index, mine), charged, missing, why)


def _steps(run: Run, times: list[CollectiveTimes], limits: list) -> list[StepReport]:
    keys = slots(times)
    index = _Index(run, times, keys)
    by_step: dict = defaultdict(list)
    for t, lim, key in zip(times, limits, keys):
        by_step[t.matched.step].append((t, lim, key))
    reports = []
    for ref in run.ranks[0].steps:
        mine = by_step.get(ref.index, [])
        reports.append(_step_report(index, ref, [m[0] for m in mine], [m[1] for m in mine],
                                    [m[2] for m in mine]))
    return reports


def analyze(run: Run, matching: Matching) -> RunReport:
    times = [times_of(m) for m in matching.matched]
    offs = offsets(run, times)
    limits = thresholds(times)
    last_counts = {r.rank: 0 for r in run.ranks}
    for t in times:
        if t.last is not None:
            last_counts[t.last] += 1
    steps = _steps(run, times, limits)
    report = RunReport(run, matching, tuple(times), tuple(limits), tuple(steps), offs,
                       last_counts, ())
    return report._replace(notes=tuple(run_notes(report)))
