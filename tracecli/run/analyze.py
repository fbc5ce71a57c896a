"""Wait against transfer, clock offsets and stragglers, from the matched collectives.

For one collective seen on every rank (ring and tree collectives end on every rank within
microseconds, whoever arrived last): the **transfer** is the shortest per-rank duration
(the last rank to arrive waited for nobody), each rank's **wait** is its duration minus the
transfer, and the rank with the shortest duration arrived **last**. None of this needs the
ranks' clocks to agree: each duration is measured on one clock.

**Clock offsets** come from the ends of the collectives that end together (all-reduce,
all-gather, reduce-scatter, barrier): rank r's offset is the median over them of its end
minus the lowest rank's end, and its spread the median absolute deviation around that.

**Per step**, for each rank: its step time, the time with no collective running on it
(``compute_ms``), and the sums of its waits and transfers. A collective's lateness is
charged to the rank that arrived last: the wait of the rank that arrived just before it
(what everyone would have saved had it been on time). The step's **straggler** is the rank
charged most, when that (``lost_ms``) passes the step's noise threshold
(:func:`noise_ms`); else there is none and ``lost_ms`` is 0.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import NamedTuple, Optional

from .load import Run
from .match import Matched, Matching

__all__ = ["CollectiveTimes", "RankStepTimes", "StepReport", "RunReport", "analyze",
           "noise_ms", "NOISE_FLOOR_MS", "NOISE_K", "SYNC_KINDS"]

NOISE_FLOOR_MS = 1.0
NOISE_K = 10.0
SYNC_KINDS = frozenset({"allreduce", "allgather", "reduce_scatter", "barrier"})
OVERLAP_SLACK_MS = 1.0


class CollectiveTimes(NamedTuple):
    matched: Matched
    duration_ms: dict[int, float]
    transfer_ms: Optional[float]  # None with one rank, or without every rank's execution
    wait_ms: dict[int, float]
    last: Optional[int]
    lateness_ms: float  # what the last rank's lateness cost (0 with fewer than 2 ranks)


class RankStepTimes(NamedTuple):
    step_ms: float
    compute_ms: float
    wait_ms: float
    transfer_ms: float


class StepReport(NamedTuple):
    step: Optional[int]
    label: str
    straggler: Optional[int]
    lost_ms: float
    noise_ms: float
    ranks: dict[int, RankStepTimes]
    charged_ms: dict[int, float]  # lateness charged to each rank


class RunReport(NamedTuple):
    run: Run
    matching: Matching
    collectives: tuple[CollectiveTimes, ...]
    steps: tuple[StepReport, ...]
    clock_offset_us: dict[int, float]
    clock_spread_us: dict[int, float]
    offsets_from: int  # collectives the offsets were estimated from
    last_counts: dict[int, int]
    notes: tuple[str, ...]

    @property
    def ranks(self) -> list[int]:
        return [r.rank for r in self.run.ranks]


def noise_ms(lateness: list[float]) -> float:
    """How late a rank can be without being a straggler: :data:`NOISE_K` times the median
    lateness of the run's collectives (the gap between the last two arrivals), at least
    :data:`NOISE_FLOOR_MS`. A late rank delays the first collective it reaches; the ones
    queued behind it start together, so the median stays the run's jitter even when a rank
    is late in every step."""
    return max(NOISE_FLOOR_MS, NOISE_K * statistics.median(lateness)) if lateness else NOISE_FLOOR_MS


def _times(m: Matched) -> CollectiveTimes:
    dur = {r: (c.end - c.start) / 1000.0 for r, c in m.by_rank.items()
           if c.start is not None and c.end is not None}
    if len(m.by_rank) < 2 or len(dur) < len(m.by_rank):
        return CollectiveTimes(m, dur, None, {}, None, 0.0)
    ordered = sorted(dur.items(), key=lambda rd: (rd[1], rd[0]))
    last, transfer = ordered[0]
    wait = {r: d - transfer for r, d in dur.items()}
    return CollectiveTimes(m, dur, transfer, wait, last, ordered[1][1] - transfer)


def _offsets(run: Run, times: list[CollectiveTimes]) -> tuple[dict, dict, int]:
    shift = {r.rank: float(r.base_us - run.base_us) for r in run.ranks}
    low = run.ranks[0].rank
    diffs: dict[int, list[float]] = defaultdict(list)
    used = 0
    for t in times:
        if t.transfer_ms is None or t.matched.first.kind not in SYNC_KINDS:
            continue
        used += 1
        ref = t.matched.by_rank[low].end + shift[low]
        for r, c in t.matched.by_rank.items():
            diffs[r].append(c.end + shift[r] - ref)
    offset, spread = {low: 0.0}, {low: 0.0}
    for r in shift:
        if r == low:
            continue
        values = diffs.get(r)
        if not values:
            offset[r] = shift[r] - shift[low]  # the recorded clocks, unchecked
            spread[r] = float("nan")
            continue
        mid = statistics.median(values)
        offset[r] = mid
        spread[r] = statistics.median(abs(v - mid) for v in values)
    return offset, spread, used


def _busy_ms(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """The time within [lo, hi] covered by ``spans`` (us in, ms out)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in spans):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total / 1000.0


def _steps(run: Run, times: list[CollectiveTimes]) -> list[StepReport]:
    by_step: dict = defaultdict(list)
    for t in times:
        by_step[t.matched.step].append(t)
    per_step = []
    for k, ref in enumerate(run.ranks[0].steps):
        mine = by_step.get(ref.index, [])
        per = {}
        for r in run.ranks:
            s = r.steps[k]
            spans = [(c.start, c.end) for c in r.collectives
                     if c.step == ref.index and c.start is not None and c.end is not None]
            waits = [(c.start, c.start + t.wait_ms[r.rank] * 1000.0) for t in mine
                     if t.transfer_ms is not None and (c := t.matched.by_rank.get(r.rank))]
            step_ms = (s.end - s.ts) / 1000.0
            busy, wait = _busy_ms(spans, s.ts, s.end), _busy_ms(waits, s.ts, s.end)
            per[r.rank] = RankStepTimes(step_ms, step_ms - busy, wait, busy - wait)
        # lateness charged to the last rank: on its own clock (collectives end together),
        # from when the rank before it arrived to when it did; overlapping ones count once
        late: dict[int, list] = defaultdict(list)
        for t in mine:
            if t.last is not None and t.lateness_ms > 0:
                end = t.matched.by_rank[t.last].end
                late[t.last].append((end - (t.transfer_ms + t.lateness_ms) * 1000.0,
                                     end - t.transfer_ms * 1000.0))
        charged = {r: _busy_ms(spans, float("-inf"), float("inf")) for r, spans in late.items()}
        per_step.append((ref, per, charged))
    lateness = [t.lateness_ms for t in times if t.last is not None]
    noise = noise_ms(lateness)
    reports = []
    for ref, per, charged in per_step:
        straggler, lost = None, 0.0
        if charged:
            top = max(sorted(charged), key=lambda r: charged[r])
            if charged[top] > noise:
                straggler, lost = top, charged[top]
        reports.append(StepReport(ref.index, ref.label, straggler, lost, noise, per, charged))
    return reports


def analyze(run: Run, matching: Matching) -> RunReport:
    times = [_times(m) for m in matching.matched]
    offset, spread, used = _offsets(run, times)
    last_counts = {r.rank: 0 for r in run.ranks}
    for t in times:
        if t.last is not None:
            last_counts[t.last] += 1
    notes = list(run.notes)
    if len(run.ranks) == 1:
        r = run.ranks[0]
        world = f" of a world of {r.world_size}" if r.world_size else ""
        notes.append(f"one rank{world}: its step times and collective durations are its "
                     "own (each duration an upper bound on the transfer), but they include "
                     "the time it waited for the other ranks; wait, transfer, stragglers and "
                     "clock offsets need every rank's trace (pass the run's directory)")
    lost = [t for t in times if t.transfer_ms is None and len(t.matched.by_rank) > 1]
    if lost:
        notes.append(f"{len(lost)} matched collectives lack an execution on some rank (the "
                     "trace lost its kernel or gloo span): no wait or transfer for them")
    for u in matching.unmatched[:8]:
        step = f"step {u.step}" if u.step is not None else "outside steps"
        notes.append(f"not matched ({step}, {u.count}): {u.reason}")
    if len(matching.unmatched) > 8:
        notes.append(f"... and {len(matching.unmatched) - 8} more sets of unmatched collectives")
    if len(run.ranks) > 1 and not used:
        notes.append("no all-reduce, all-gather or reduce-scatter was seen on every rank: "
                     "the clock offsets are the recorded clocks' own, not estimated")
    suspect = _misaligned(run, offset, times)
    if suspect:
        notes.append(suspect)
    return RunReport(run, matching, tuple(times), tuple(_steps(run, times)), offset, spread,
                     used, last_counts, tuple(notes))


def _misaligned(run: Run, offset: dict[int, float],
                times: list[CollectiveTimes]) -> Optional[str]:
    """A warning when many matched collectives have no time that every rank spent in them
    once the clocks are aligned (the latest start after the earliest end by more than
    :data:`OVERLAP_SLACK_MS`): the matching may pair different collectives, as order
    matching does on filtered traces (HTA's sampled traces: 6 of 10 pairs)."""
    shift = {r.rank: float(r.base_us - run.base_us) - offset.get(r.rank, 0.0) for r in run.ranks}
    windows = []
    for t in times:
        by = t.matched.by_rank
        if t.transfer_ms is None or t.matched.first.kind not in SYNC_KINDS:
            continue
        windows.append((min(c.end + shift[r] for r, c in by.items())
                        - max(c.start + shift[r] for r, c in by.items())) / 1000.0)
    bad = [w for w in windows if w < -OVERLAP_SLACK_MS]
    if len(windows) < 4 or len(bad) * 4 <= len(windows):
        return None
    return (f"{len(bad)} of {len(windows)} matched collectives have no time all ranks spent "
            f"in them once the clocks are aligned (the latest start after the earliest end, "
            f"by up to {-min(bad):.1f} ms): the matching may pair different collectives (a "
            "filtered trace, or groups launched in different orders)")
