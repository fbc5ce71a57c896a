"""What a run's report must say besides its tables: what one rank cannot tell, what was not
matched and why, which ranks are missing and what that hides, how the clocks were aligned."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .times import SYNC_KINDS

if TYPE_CHECKING:
    from .analyze import RunReport

__all__ = ["run_notes", "OVERLAP_SLACK_MS", "SHOWN_UNMATCHED"]

OVERLAP_SLACK_MS = 1.0
SHOWN_UNMATCHED = 8


def run_notes(report: RunReport) -> list[str]:
    run = report.run
    notes = _missing(report) + list(run.notes)
    if len(run.ranks) == 1:
        r = run.ranks[0]
        world = f" of a world of {r.world_size}" if r.world_size else ""
        notes.append(f"one rank{world}: its step times and collective durations are its "
                     "own (each duration an upper bound on the transfer), but they include "
                     "the time it waited for the other ranks; wait, transfer, stragglers and "
                     "clock offsets need every rank's trace (pass the run's directory)")
    lost = [t for t in report.collectives if t.transfer_ms is None and len(t.matched.by_rank) > 1]
    if lost:
        notes.append(f"{len(lost)} matched collectives lack an execution on some rank (the "
                     "trace lost its kernel or gloo span): no wait or transfer for them")
    unmatched = report.matching.unmatched
    for u in unmatched[:SHOWN_UNMATCHED]:
        step = f"step {u.step}" if u.step is not None else "every step"
        notes.append(f"not matched ({step}{', group ' + u.group if u.group else ''}): {u.reason}")
    if len(unmatched) > SHOWN_UNMATCHED:
        notes.append(f"... and {len(unmatched) - SHOWN_UNMATCHED} more unmatched (all in "
                     "--json's unmatched)")
    notes += _clock_notes(report)
    suspect = _misaligned(report)
    if suspect:
        notes.append(suspect)
    return notes


def _missing(report: RunReport) -> list[str]:
    missing = report.missing_ranks
    if not missing:
        return []
    shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
    if len(report.run.ranks) < 2:
        return [f"{len(missing)} of {report.run.world_size} ranks have no trace here ({shown}): "
                "their lateness shows only as the others' waits"]
    world = report.run.world_size
    late = [s for s in report.steps if s.straggler_missing]
    said = (f"missing ranks: {len(missing)} of {world} ranks have no trace here ({shown}); "
            "what they cost shows only as the other ranks' waits, held in the transfer of "
            "every collective of their groups")
    if late:
        said += "; " + ", ".join(f"{s.label}: rank {s.straggler} kept the others {s.lost_ms:.1f} ms"
                                 for s in late[:4])
    return [said]


def _clock_notes(report: RunReport) -> list[str]:
    out = []
    offs = report.offsets
    if len(report.run.ranks) > 1 and not offs.collectives:
        out.append("no synchronising collective (all-reduce, all-gather, reduce-scatter, "
                   "all-to-all, barrier, send with its recv) was seen on two ranks: the clock "
                   "offsets are the recorded clocks' own, not estimated")
    elif offs.unlinked:
        shown = ", ".join(map(str, offs.unlinked[:8]))
        out.append(f"ranks {shown} share no synchronising collective with rank "
                   f"{report.run.ranks[0].rank}'s: their clock offsets are the recorded clocks'")
    return out


def _misaligned(report: RunReport) -> Optional[str]:
    """A warning when many matched collectives have no time that every rank spent in them
    once the clocks are aligned (the latest start after the earliest end by more than
    :data:`OVERLAP_SLACK_MS`): the matching may pair different collectives, as order
    matching does on filtered traces (HTA's sampled traces: 6 of 10 pairs)."""
    run = report.run
    shift = {r.rank: float(r.base_us - run.base_us) - report.clock_offset_us.get(r.rank, 0.0)
             for r in run.ranks}
    steps = {r.rank: {s.index: s.ts for s in r.steps} for r in run.ranks}
    windows = []
    for t in report.collectives:
        by = t.matched.by_rank
        if t.transfer_ms is None or t.matched.first.kind.value not in SYNC_KINDS \
                or t.matched.first.kind.point_to_point:
            continue
        starts = [steps[r][c.step] + 1000.0 * c.start_ms + shift[r] for r, c in by.items()]
        ends = [steps[r][c.step] + 1000.0 * c.end_ms + shift[r] for r, c in by.items()]
        windows.append((min(ends) - max(starts)) / 1000.0)
    bad = [w for w in windows if w < -OVERLAP_SLACK_MS]
    if len(windows) < 4 or len(bad) * 4 <= len(windows):
        return None
    return (f"{len(bad)} of {len(windows)} matched collectives have no time all ranks spent "
            f"in them once the clocks are aligned (the latest start after the earliest end, "
            f"by up to {-min(bad):.1f} ms): the matching may pair different collectives (a "
            "filtered trace, or groups launched in different orders)")
