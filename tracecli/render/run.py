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

from ..run.analyze import RunReport
from .chrome import chrome_trace, complete_event
from .layout import WORD, Column, Fitted, with_rank
from .tables import hidden_caption, plural, truncated

__all__ = ["run_json", "run_view", "run_chrome_trace", "RUN_FORMAT"]

RUN_FORMAT = "tracecli-run"


def _ms(x: Optional[float]) -> Optional[float]:
    return None if x is None or not math.isfinite(x) else round(x, 3)


def _by_rank(values: dict[int, float], digits: int = 3) -> dict[str, Optional[float]]:
    return {str(r): (None if not math.isfinite(v) else round(v, digits))
            for r, v in sorted(values.items())}


def run_json(report: RunReport) -> dict[str, Any]:
    run = report.run
    first = run.ranks[0]
    steps = [{"step": s.step, "label": s.label, "straggler": s.straggler,
              "lost_ms": round(s.lost_ms, 3), "noise_ms": round(s.noise_ms, 3),
              "charged_ms": _by_rank(s.charged_ms),
              "ranks": {str(r): {"step_ms": round(t.step_ms, 3), "compute_ms": round(t.compute_ms, 3),
                                 "wait_ms": round(t.wait_ms, 3), "transfer_ms": round(t.transfer_ms, 3)}
                        for r, t in sorted(s.ranks.items())}}
             for s in report.steps]
    collectives = []
    for t in report.collectives:
        m, c = t.matched, t.matched.first
        collectives.append({
            "step": m.step, "index": m.index, "kind": c.kind, "purpose": c.purpose,
            "elements": c.elements, "dtype": c.dtype, "group": m.group,
            "device": c.device, "transfer_ms": _ms(t.transfer_ms),
            "wait_ms": _by_rank(t.wait_ms) if t.transfer_ms is not None else None,
            "duration_ms": _by_rank(t.duration_ms), "last": t.last})
    return {
        "format": RUN_FORMAT, "version": 1,
        "run": run.given, "world_size": run.world_size, "backend": first.backend,
        "ranks": report.ranks,
        "files": {str(r.rank): r.path for r in run.ranks},
        "matched_by": report.matching.key,
        "clock_offset_us": _by_rank(report.clock_offset_us, 1),
        "clock_offset_spread_us": _by_rank(report.clock_spread_us, 1),
        "clock_offset_collectives": report.offsets_from,
        "last_counts": {str(r): n for r, n in sorted(report.last_counts.items())},
        "steps": steps,
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
STEPS_ORDER = ("straggler", "lost ms", "most wait ms", "longest step ms", "noise ms")
RANKS_ORDER = ("offset us", "last", "straggler", "wait", "step", "compute", "transfer",
               "spread us")


def _steps_table(report: RunReport):
    if len(report.run.ranks) == 1:
        return _one_rank_steps(report)
    rows = []
    for s in report.steps:
        slow = max(s.ranks.items(), key=lambda rt: (rt[1].step_ms, -rt[0]), default=None)
        waits = max(s.ranks.items(), key=lambda rt: (rt[1].wait_ms, -rt[0]), default=None)
        rows.append([s.label, "-" if s.straggler is None else str(s.straggler),
                     f"{s.lost_ms:.1f}", f"{s.noise_ms:.1f}",
                     f"{slow[1].step_ms:.1f}" if slow else "-",
                     f"{waits[1].wait_ms:.1f} (r{waits[0]})" if waits else "-"])
    cols = [Column("step", WORD, key=True)] + [Column(h) for h in (
        "straggler", "lost ms", "noise ms", "longest step ms", "most wait ms")]
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
        rows.append([str(r), f"{report.clock_offset_us.get(r, 0.0):+,.1f}",
                     f"{report.clock_spread_us.get(r, 0.0):.1f}",
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
            lines.append(f"straggler: rank {worst.straggler} cost {worst.label} "
                         f"{worst.lost_ms:.1f} ms (the others waited for it; had it been on "
                         f"time the step would be that much shorter); stragglers in "
                         f"{len(flagged)} of {len(report.steps)} steps")
        else:
            lines.append("no straggler: in every step the waits are within the noise "
                         f"(at least {min(s.noise_ms for s in report.steps):.1f} ms; "
                         "docs/runs.md)" if report.steps else "no steps")
    lines.extend(f"note: {text}" for text in report.notes)
    return lines


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

        for s in r.steps:
            events.append(complete_event(s.label, ms(s.ts), (s.end - s.ts) / 1000.0, pid, 0, "step"))
            if s.backward:
                events.append(complete_event("backward", ms(s.backward[0]),
                                             (s.backward[1] - s.backward[0]) / 1000.0, pid, 1,
                                             "compute"))
        for c in r.collectives:
            if c.start is None or c.end is None:
                continue
            t = times.get((r.rank, id(c)))
            args = {"elements": c.elements, "dtype": c.dtype, "purpose": c.purpose}
            wait = t.wait_ms.get(r.rank) if t is not None and t.transfer_ms is not None else None
            if wait:
                events.append(complete_event(f"wait {c.kind}", ms(c.start), wait, pid, 2, "wait",
                                             dict(args, last=t.last)))
                events.append(complete_event(c.kind, ms(c.start) + wait, t.transfer_ms, pid, 2,
                                             "transfer", args))
            else:
                events.append(complete_event(c.kind, ms(c.start), (c.end - c.start) / 1000.0,
                                             pid, 2, "transfer", args))
    return chrome_trace(events, tracks, processes)
