"""Two runs side by side (``tracecli diff RUN_A RUN_B``): what changed, and whether it is
more than the noise.

Each run (or single trace) is summarised step by step: for each profiled step the median
over its ranks of the step time, the busy compute, the exposed communication (collective
time with no compute running), the wait and the transfer (:mod:`.analyze`). A quantity
changed where the medians over the steps differ by more than the runs' own noise: the larger
interquartile range of the two runs' steps (what the quantity varies by from step to step
within a run), and by more than :data:`MIN_CHANGE` of its value; else it is said to be
within the noise, whatever its sign. On a few steps the noise is rough: so is the verdict.

Buckets are each step's gradient reductions in launch order (DDP's bucket k is the k-th),
with their elements and their median transfer (one rank alone: its duration); collectives
are compared slot by slot (group, kind, place in the step: :func:`.noise.slots`); ops by
name and occurrence (:mod:`.stepops`), the ones that changed most first.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import NamedTuple, Optional, Sequence

from ..model import Purpose
from .analyze import RunReport
from .noise import slots

__all__ = ["Change", "Bucket", "SlotChange", "OpChange", "RunDiff", "diff_runs", "change", "run_buckets",
           "MIN_CHANGE", "TOP_OPS"]

MIN_CHANGE = 0.01
TOP_OPS = 10
_FIELDS = (("step", "step_ms"), ("compute", "busy_ms"), ("exposed communication", "exposed_ms"),
           ("wait", "wait_ms"), ("transfer", "transfer_ms"))


class Change(NamedTuple):
    what: str
    before_ms: Optional[float]
    after_ms: Optional[float]
    noise_ms: Optional[float]
    verdict: str  # "faster", "slower", "within noise", "not measured"

    @property
    def delta_ms(self) -> Optional[float]:
        if self.before_ms is None or self.after_ms is None:
            return None
        return self.after_ms - self.before_ms


class Bucket(NamedTuple):
    elements: Optional[int]
    dtype: Optional[str]
    ms: Optional[float]  # median transfer over the steps (one rank: its duration)


class SlotChange(NamedTuple):
    slot: str
    before: Optional[Bucket]
    after: Optional[Bucket]


class OpChange(NamedTuple):
    op: str
    kind: str
    before_ms: float
    after_ms: float

    @property
    def delta_ms(self) -> float:
        return self.after_ms - self.before_ms


class RunDiff(NamedTuple):
    before: RunReport
    after: RunReport
    changes: tuple[Change, ...]
    buckets: tuple[tuple[Bucket, ...], tuple[Bucket, ...]]
    collectives: tuple[SlotChange, ...]
    ops: tuple[OpChange, ...]
    notes: tuple[str, ...]

    def change_of(self, what: str) -> Change:
        return next(c for c in self.changes if c.what == what)


def _iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def change(what: str, before: Sequence[float], after: Sequence[float]) -> Change:
    """Medians of two samples of step values, and whether they differ past the noise."""
    if not before or not after:
        return Change(what, statistics.median(before) if before else None,
                      statistics.median(after) if after else None, None, "not measured")
    a, b = statistics.median(before), statistics.median(after)
    noise = max(_iqr(before), _iqr(after))
    if abs(b - a) <= max(noise, MIN_CHANGE * abs(a)):
        return Change(what, a, b, noise, "within noise")
    return Change(what, a, b, noise, "faster" if b < a else "slower")


def _per_step(report: RunReport, field: str) -> list[float]:
    out = []
    for s in report.steps:
        values = [getattr(t, field) for t in s.ranks.values() if getattr(t, field) is not None]
        if values:
            out.append(statistics.median(values))
    return out


def run_buckets(report: RunReport) -> tuple[Bucket, ...]:
    """Each step's gradient reductions in launch order, as buckets (medians over steps)."""
    by_place: dict[int, list] = defaultdict(list)
    counters: dict = defaultdict(int)
    for t in report.collectives:
        c = t.matched.first
        if c.purpose is not Purpose.GRADIENTS:
            continue
        k = counters[t.matched.step]
        counters[t.matched.step] += 1
        ms = t.transfer_ms if t.transfer_ms is not None else min(t.duration_ms.values(), default=None)
        by_place[k].append((c.elements, c.dtype, ms))
    out = []
    for k in sorted(by_place):
        rows = by_place[k]
        times = [ms for _, _, ms in rows if ms is not None]
        out.append(Bucket(rows[0][0], rows[0][1], statistics.median(times) if times else None))
    return tuple(out)


def _slots(report: RunReport) -> dict[str, Bucket]:
    by: dict[str, list] = defaultdict(list)
    for t, key in zip(report.collectives, slots(report.collectives)):
        name = " ".join(str(k) for k in key if k is not None)
        c = t.matched.first
        ms = t.transfer_ms if t.transfer_ms is not None else min(t.duration_ms.values(), default=None)
        by[name].append((c.elements, c.dtype, ms))
    out = {}
    for name, rows in by.items():
        times = [ms for _, _, ms in rows if ms is not None]
        out[name] = Bucket(rows[0][0], rows[0][1], statistics.median(times) if times else None)
    return out


def _ops(report: RunReport) -> dict[str, tuple[str, float]]:
    values: dict[str, list[float]] = defaultdict(list)
    kinds: dict[str, str] = {}
    for r in report.run.ranks:
        for s in r.steps:
            if s.ops is None:
                continue
            for key, kind, ms in zip(s.ops.keys, s.ops.kinds, s.ops.ms):
                values[key].append(ms)
                kinds[key] = kind
    return {k: (kinds[k], statistics.median(v)) for k, v in values.items()}


def diff_runs(before: RunReport, after: RunReport) -> RunDiff:
    """What changed from ``before`` to ``after``."""
    changes = tuple(change(what, _per_step(before, f), _per_step(after, f)) for what, f in _FIELDS)
    a, b = _slots(before), _slots(after)
    collectives = tuple(SlotChange(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)))
    oa, ob = _ops(before), _ops(after)
    ops = [OpChange(k, (oa.get(k) or ob.get(k))[0], oa.get(k, ("", 0.0))[1], ob.get(k, ("", 0.0))[1])
           for k in set(oa) | set(ob)]
    ops = sorted((o for o in ops if abs(o.delta_ms) >= 0.1), key=lambda o: (-abs(o.delta_ms), o.op))
    notes = []
    for side, r in (("before", before), ("after", after)):
        if len(r.steps) < 4:
            notes.append(f"{side}: {len(r.steps)} profiled steps: the noise is estimated from "
                         "few steps; profile more (torch.profiler.schedule(active=...))")
    if before.run.world_size != after.run.world_size:
        notes.append(f"the runs have {before.run.world_size} and {after.run.world_size} ranks: "
                     "step times differ for that reason too")
    return RunDiff(before, after, changes, (run_buckets(before), run_buckets(after)), collectives,
                   tuple(ops[:TOP_OPS]), tuple(notes))
