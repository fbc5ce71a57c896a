"""A run's straggler report: the JSON document, the text report and the aligned timeline.

JSON (``inspect RUN --json``, documented in ``docs/json.md``): ``ranks``, ``clock_offset_us``
(rank -> how many microseconds its clock reads ahead of the lowest rank's), ``steps`` and
``collectives``, with rank keys as strings (JSON object keys are strings).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Optional

from rich.console import Group
from rich.text import Text

from ..model import CollectiveKind
from ..run.analyze import RunReport
from ..run.extract import at_us
from ..run.noise import FLOOR_MS, K, SLOT_FACTOR
from ..run.times import arrival_ms
from .chrome import chrome_trace, complete_event
from .layout import WORD, Column, Fitted, with_rank
from .tables import hidden_caption, plural, truncated

__all__ = ["run_json", "run_view", "run_chrome_trace", "RUN_FORMAT"]

RUN_FORMAT = "tracecli-run"


def _ms(x: Optional[float]) -> Optional[float]:
    return None if x is None or not math.isfinite(x) else round(x, 3)


def _by_rank(values: dict[int, Optional[float]], digits: int = 3) -> dict[str, Optional[float]]:
    return {str(r): (None if v is None or not math.isfinite(v) else round(v, digits))
            for r, v in sorted(values.items())}


def _step_json(s) -> dict[str, Any]:
    return {"step": s.step, "label": s.label, "straggler": s.straggler,
            "straggler_missing": s.straggler_missing,
            "lost_ms": round(s.lost_ms, 3), "noise_ms": _ms(s.noise_ms),
            "charged_ms": _by_rank(s.charged_ms),
            "why": [{"op": w.op, "kind": w.kind, "ms": round(w.ms, 3),
                     "others_ms": round(w.others_ms, 3), "added_ms": round(w.added_ms, 3)}
                    for w in s.why],
            "ranks": {str(r): {"step_ms": round(t.step_ms, 3), "compute_ms": round(t.compute_ms, 3),
                               "wait_ms": round(t.wait_ms, 3), "transfer_ms": round(t.transfer_ms, 3),
                               "busy_ms": _ms(t.busy_ms), "exposed_ms": _ms(t.exposed_ms)}
                      for r, t in sorted(s.ranks.items())}}


def _collective_json(t, threshold: Optional[float], device: str) -> dict[str, Any]:
    m, c = t.matched, t.matched.first
    doc = {"step": m.step, "index": m.index, "kind": c.kind.value, "purpose": c.purpose.value,
           "elements": c.elements, "dtype": c.dtype, "group": m.group,
           "ranks": sorted(m.by_rank), "members": list(m.members), "missing": list(m.missing),
           "device": device,
           "transfer_ms": _ms(t.transfer_ms),
           "wait_ms": _by_rank(t.wait_ms) if t.transfer_ms is not None else None,
           "duration_ms": _by_rank(t.duration_ms), "last": t.last,
           "lateness_ms": round(t.lateness_ms, 3) if t.last is not None else None,
           "threshold_ms": _ms(threshold),
           "flagged": threshold is not None and t.last is not None and t.lateness_ms > threshold}
    if c.kind is CollectiveKind.ALL_TO_ALL:
        doc["elements_by_rank"] = {str(r): x.elements for r, x in sorted(m.by_rank.items())}
    if c.kind.point_to_point:
        send = next((r for r, x in m.by_rank.items() if x.kind is CollectiveKind.SEND), None)
        doc["from"], doc["to"] = send, next((r for r in m.by_rank if r != send), None)
    return doc


def run_json(report: RunReport) -> dict[str, Any]:
    run = report.run
    first = run.ranks[0]
    devices = {r.rank: any(s.device for s in r.steps) for r in run.ranks}
    collectives = []
    for t, threshold in zip(report.collectives, report.thresholds):
        device = "gpu" if devices.get(min(t.matched.by_rank)) else "cpu"
        collectives.append(_collective_json(t, threshold, device))
    return {
        "format": RUN_FORMAT, "version": 2,
        "run": run.given, "world_size": run.world_size, "backend": first.backend,
        "ranks": report.ranks, "missing_ranks": list(report.missing_ranks),
        "files": {str(r.rank): r.path for r in run.ranks},
        "clock": {str(r): ("device" if d else "host") for r, d in sorted(devices.items())},
        "matched_by": report.matching.key,
        "clock_offset_us": _by_rank(report.clock_offset_us, 1),
        "clock_offset_spread_us": _by_rank(report.clock_spread_us, 1),
        "clock_offset_via": {str(r): v for r, v in sorted(report.offsets.via.items())},
        "clock_offset_collectives": report.offsets_from,
        "noise": {"floor_ms": FLOOR_MS, "k": K, "slot_factor": SLOT_FACTOR},
        "last_counts": {str(r): n for r, n in sorted(report.last_counts.items())},
        "steps": [_step_json(s) for s in report.steps],
        "collectives": collectives,
        "unmatched": [{"step": u.step, "group": u.group, "count": u.count, "reason": u.reason}
                      for u in report.matching.unmatched],
        "notes": list(report.notes),
    }


def run_view(report: RunReport, top: Optional[int] = None) -> Group:
    """The text report: who is late, by how much, and what it costs, step by step and
    rank by rank (tables that fit 80 columns at any rank count; ``top`` shortens the ranks)."""
    run = report.run
    n = len(run.ranks)
    world = f" of {run.world_size}" if run.world_size else ""
    head = Text(f"run: {run.given}: {plural(n, 'rank')}{world} "
                f"({run.ranks[0].backend or 'backend not recorded'}), "
                f"{plural(len(report.steps), 'step')}, "
                f"{plural(len(report.collectives), 'collective')} matched by "
                f"{report.matching.key}")
    parts = [head, _steps_table(report)]
    if n > 1:
        parts.append(_ranks_table(report, top))
    parts.append(Text("\n".join(_verdict(report))))
    return Group(*parts)


# Which columns move to a second table first when a table is too wide: the last named.
STEPS_ORDER = ("straggler", "lost ms", "most wait ms", "longest step ms", "threshold ms")
RANKS_ORDER = ("offset us", "last", "straggler", "wait", "step", "compute", "transfer",
               "spread us")


def _steps_table(report: RunReport):
    if len(report.run.ranks) == 1:
        return _one_rank_steps(report)
    rows = []
    for s in report.steps:
        slow = max(s.ranks.items(), key=lambda rt: (rt[1].step_ms, -rt[0]), default=None)
        waits = max(s.ranks.items(), key=lambda rt: (rt[1].wait_ms, -rt[0]), default=None)
        who = "-" if s.straggler is None else f"{s.straggler}" + (" (no trace)" if s.straggler_missing else "")
        rows.append([s.label, who, f"{s.lost_ms:.1f}",
                     "-" if s.noise_ms is None else f"{s.noise_ms:.1f}",
                     f"{slow[1].step_ms:.1f}" if slow else "-",
                     f"{waits[1].wait_ms:.1f} (r{waits[0]})" if waits else "-"])
    cols = [Column("step", WORD, key=True)] + [Column(h) for h in (
        "straggler", "lost ms", "threshold ms", "longest step ms", "most wait ms")]
    return Fitted("Steps: the rank the others waited for (straggler) and what it cost",
                  with_rank(cols, STEPS_ORDER), rows)


def _one_rank_steps(report: RunReport):
    """One rank cannot split its collectives' time into wait and transfer, nor name a
    straggler: its steps say what it spent computing and in collectives, nothing more."""
    rank = report.run.ranks[0].rank
    rows = [[s.label, f"{t.step_ms:.1f}", f"{t.compute_ms:.1f}",
             f"{t.wait_ms + t.transfer_ms:.1f}"]
            for s in report.steps for t in [s.ranks[rank]] if rank in s.ranks]
    cols = [Column("step", WORD, key=True)] + [Column(h) for h in (
        "step ms", "compute ms", "in collectives ms")]
    return Fitted(f"Steps of rank {rank} (its collectives' time includes waiting for the "
                  "others)", cols, rows)


def _ranks_table(report: RunReport, top: Optional[int]):
    first = report.run.ranks[0].rank
    total = sum(report.last_counts.values()) or 1
    strag = {r: sum(1 for s in report.steps if s.straggler == r) for r in report.ranks}
    rows = []
    for r in report.ranks:
        times = [s.ranks[r] for s in report.steps if r in s.ranks]
        mean = (lambda f: f"{statistics.fmean(f(t) for t in times):.1f}" if times else "-")
        last = report.last_counts.get(r, 0)
        spread = report.clock_spread_us.get(r)
        rows.append([str(r), f"{report.clock_offset_us.get(r, 0.0):+,.1f}",
                     "-" if spread is None else f"{spread:.1f}",
                     f"{last} ({100.0 * last / total:.0f}%)", str(strag[r]),
                     mean(lambda t: t.step_ms), mean(lambda t: t.compute_ms),
                     mean(lambda t: t.wait_ms), mean(lambda t: t.transfer_ms)])
    shown_rows, hidden = truncated(rows, top)
    cols = [Column("rank", key=True)] + [Column(h) for h in (
        "offset us", "spread us", "last", "straggler", "step", "compute", "wait", "transfer")]
    return Fitted(f"Ranks: clock offset (ahead of rank {first}'s, from {report.offsets_from} "
                  "collective ends), times last, mean ms a step",
                  with_rank(cols, RANKS_ORDER), shown_rows, hidden_caption(hidden, "rank"))


def _verdict(report: RunReport) -> list[str]:
    lines = []
    if len(report.run.ranks) > 1 and report.collectives:
        flagged = [s for s in report.steps if s.straggler is not None]
        if flagged:
            worst = max(flagged, key=lambda s: s.lost_ms)
            absent = " (it has no trace here)" if worst.straggler_missing else ""
            lines.append(f"straggler: rank {worst.straggler}{absent} cost {worst.label} "
                         f"{worst.lost_ms:.1f} ms (the others waited for it; had it been on "
                         f"time the step would be that much shorter); stragglers in "
                         f"{len(flagged)} of {len(report.steps)} steps")
            for s in flagged:
                lines.extend(_why(s))
        else:
            bars = [s.noise_ms for s in report.steps if s.noise_ms is not None]
            lines.append("no straggler: in every step each collective's lateness is within "
                         "its noise threshold" + (f" ({min(bars):.1f} to {max(bars):.1f} ms; "
                                                  "docs/runs.md)" if bars else ""))
    lines.extend(f"note: {text}" for text in report.notes)
    return lines


def _why(s) -> list[str]:
    """Why a step's straggler was late: its ops that added the most time."""
    if s.straggler_missing:
        return [f"  {s.label}: rank {s.straggler} has no trace: why it was late cannot be seen"]
    if not s.why:
        return [f"  {s.label}: rank {s.straggler} was late by {s.lost_ms:.1f} ms; no op of its "
                "took longer than the same op on the other ranks (its collective thread, or "
                "the host, held it)"]
    out = [f"  {s.label}: rank {s.straggler}, late by {s.lost_ms:.1f} ms; its ops longer than "
           "on the others:"]
    for w in s.why[:3]:
        name = w.op.replace(_EVALUATE, "").replace("untraced host time", "host time")
        out.append(f"    +{w.added_ms:.1f} ms {name} ({w.kind}; {w.ms:.1f} against {w.others_ms:.1f})")
    return out


_EVALUATE = "autograd::engine::evaluate_function: "


def run_chrome_trace(report: RunReport) -> dict[str, Any]:
    """One process per rank, on the lowest rank's clock (offsets removed): steps, the
    backward pass, and each collective (its wait and its transfer)."""
    run = report.run
    events = []
    tracks, processes = {}, {}
    origin = None
    for r in run.ranks:
        shift = (r.base_us - run.base_us) - report.clock_offset_us.get(r.rank, 0.0)
        for s in r.steps:
            t = s.ts + shift
            origin = t if origin is None else min(origin, t)
    origin = origin or 0.0
    times = {}
    for t in report.collectives:
        for rank, c in t.matched.by_rank.items():
            times[(rank, id(c))] = t
    for r in run.ranks:
        pid = r.rank
        processes[pid] = f"rank {r.rank}"
        tracks[(pid, 0)], tracks[(pid, 1)], tracks[(pid, 2)] = "steps", "backward", "collectives"
        shift = (r.base_us - run.base_us) - report.clock_offset_us.get(r.rank, 0.0) - origin

        def ms(x: float) -> float:
            return (x + shift) / 1000.0

        steps = {s.index: s for s in r.steps}
        for s in r.steps:
            events.append(complete_event(s.label, ms(s.ts), (s.end - s.ts) / 1000.0, pid, 0, "step"))
            if s.backward:
                events.append(complete_event("backward", ms(s.backward[0]),
                                             (s.backward[1] - s.backward[0]) / 1000.0, pid, 1,
                                             "compute"))
        for c in r.collectives:
            step = steps.get(c.step)
            if step is None or c.start_ms is None or c.end_ms is None:
                continue
            t = times.get((r.rank, id(c)))
            args = {"elements": c.elements, "dtype": c.dtype, "purpose": c.purpose.value}
            wait = t.wait_ms.get(r.rank) if t is not None and t.transfer_ms is not None else None
            begin = ms(at_us(step, arrival_ms(c)))
            if wait:
                events.append(complete_event(f"wait {c.kind.value}", begin, wait, pid, 2, "wait",
                                             dict(args, last=t.last)))
                events.append(complete_event(c.kind.value, begin + wait, t.transfer_ms, pid, 2,
                                             "transfer", args))
            else:
                events.append(complete_event(c.kind.value, begin, c.end_ms - arrival_ms(c),
                                             pid, 2, "transfer", args))
    return chrome_trace(events, tracks, processes)
