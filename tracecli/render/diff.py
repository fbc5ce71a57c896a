"""``tracecli diff RUN_A RUN_B``: the JSON document and the text report.

JSON (``diff --json``, documented in ``docs/runs.md``): ``before``/``after`` (what each run
is), ``changes`` (step, compute, exposed communication, wait, transfer: medians over the
steps, their noise and verdict), ``buckets`` (each run's), ``collectives`` (slot by slot),
``ops`` (those that changed most) and, given ``--plan``, ``advice`` (did it work).
"""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Group
from rich.text import Text

from ..run.diff import Bucket, RunDiff
from .tables import new_table, value_columns

__all__ = ["diff_json", "diff_view", "DIFF_FORMAT"]

DIFF_FORMAT = "tracecli-diff"


def _r(x: Optional[float], digits: int = 3) -> Optional[float]:
    return None if x is None else round(x, digits)


def _side(report) -> dict[str, Any]:
    run = report.run
    return {"run": run.given, "ranks": report.ranks, "world_size": run.world_size,
            "backend": run.ranks[0].backend, "steps": [s.label for s in report.steps]}


def _bucket(b: Optional[Bucket]) -> Optional[dict[str, Any]]:
    return None if b is None else {"elements": b.elements, "dtype": b.dtype, "ms": _r(b.ms)}


def _advice(advice) -> dict[str, Any]:
    return {"plan": advice.plan, "settings": advice.settings,
            "predicted_before_ms": _r(advice.predicted_before_ms),
            "predicted_after_ms": _r(advice.predicted_after_ms),
            "predicted_gain_ms": _r(advice.predicted_gain_ms),
            "measured_before_ms": _r(advice.measured.before_ms),
            "measured_after_ms": _r(advice.measured.after_ms),
            "measured_gain_ms": _r(-advice.measured.delta_ms) if advice.measured.delta_ms is not None else None,
            "noise_ms": _r(advice.measured.noise_ms), "applied": advice.applied,
            "buckets_run": list(advice.buckets_run), "buckets_plan": list(advice.buckets_plan),
            "verdict": advice.verdict, "notes": list(advice.notes)}


def diff_json(diff: RunDiff, advice=None) -> dict[str, Any]:
    doc = {
        "format": DIFF_FORMAT, "version": 1,
        "before": _side(diff.before), "after": _side(diff.after),
        "changes": [{"what": c.what, "before_ms": _r(c.before_ms), "after_ms": _r(c.after_ms),
                     "delta_ms": _r(c.delta_ms), "noise_ms": _r(c.noise_ms), "verdict": c.verdict}
                    for c in diff.changes],
        "buckets": {"before": [_bucket(b) for b in diff.buckets[0]],
                    "after": [_bucket(b) for b in diff.buckets[1]]},
        "collectives": [{"slot": c.slot, "before": _bucket(c.before), "after": _bucket(c.after)}
                        for c in diff.collectives],
        "ops": [{"op": o.op, "kind": o.kind, "before_ms": _r(o.before_ms),
                 "after_ms": _r(o.after_ms), "delta_ms": _r(o.delta_ms)} for o in diff.ops],
        "notes": list(diff.notes),
    }
    if advice is not None:
        doc["advice"] = _advice(advice)
    return doc


def _ms(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


def _changes_table(diff: RunDiff):
    table = new_table("Per step, median over the steps (each step: the median over its ranks)")
    table.add_column("", no_wrap=True)
    rows = [[c.what, _ms(c.before_ms), _ms(c.after_ms),
             "-" if c.delta_ms is None else f"{c.delta_ms:+.3f}", _ms(c.noise_ms), c.verdict]
            for c in diff.changes]
    shown = value_columns(table, ["before ms", "after ms", "change", "noise ms", "verdict"],
                          rows, start=1)
    for row in rows:
        table.add_row(*row)
    return shown


def _buckets_table(diff: RunDiff):
    before, after = diff.buckets
    # no unit at the title's end, where a narrow table would leave it on a line of its own
    table = new_table("Gradient buckets in launch order (times: the median transfer)")
    table.add_column("#", justify="right", no_wrap=True)
    rows = []
    for k in range(max(len(before), len(after))):
        a = before[k] if k < len(before) else None
        b = after[k] if k < len(after) else None
        rows.append([str(k), "-" if a is None else f"{a.elements:,}" if a.elements else "?",
                     _ms(a.ms if a else None), "-" if b is None else f"{b.elements:,}" if b.elements else "?",
                     _ms(b.ms if b else None)])
    shown = value_columns(table, ["before elements", "before ms", "after elements", "after ms"],
                          rows, start=1)
    for row in rows:
        table.add_row(*row)
    return shown


def _ops_lines(diff: RunDiff) -> list[str]:
    if not diff.ops:
        return ["ops: none changed by 0.1 ms or more"]
    out = ["ops that changed most (median over steps and ranks):"]
    for o in diff.ops:
        out.append(f"  {o.delta_ms:+.3f} ms {o.op} ({o.kind}): {o.before_ms:.3f} -> {o.after_ms:.3f} ms")
    return out


def _advice_lines(advice) -> list[str]:
    m = advice.measured
    gain = "-" if m.delta_ms is None else f"{-m.delta_ms:+.3f} ms"
    lines = [f"did the advice work? {advice.verdict}",
             f"  the plan ({advice.plan}): {advice.settings}",
             f"  predicted: {advice.predicted_before_ms:.3f} -> {advice.predicted_after_ms:.3f} ms "
             f"a step, a gain of {advice.predicted_gain_ms:+.3f} ms",
             f"  measured: {_ms(m.before_ms)} -> {_ms(m.after_ms)} ms a step, a gain of {gain} "
             f"(noise {_ms(m.noise_ms)} ms: {m.verdict})"]
    if advice.applied is not None:
        lines.append("  the run's buckets are the plan's" if advice.applied else
                     f"  the run's buckets ({', '.join(f'{b:,}' for b in advice.buckets_run)} bytes) "
                     f"are not the plan's ({', '.join(f'{b:,}' for b in advice.buckets_plan)})")
    lines.extend(f"  note: {n}" for n in advice.notes)
    return lines


def diff_view(diff: RunDiff, advice=None) -> Group:
    head = Text(f"before: {diff.before.run.given} ({len(diff.before.steps)} steps); "
                f"after: {diff.after.run.given} ({len(diff.after.steps)} steps)")
    step = diff.change_of("step")
    if step.verdict in ("faster", "slower"):
        verdict = (f"the step is {step.verdict}: {_ms(step.before_ms)} -> {_ms(step.after_ms)} ms "
                   f"({step.delta_ms:+.3f} ms, past the noise of {step.noise_ms:.3f} ms)")
    else:
        verdict = (f"the step did not change beyond the noise: {_ms(step.before_ms)} -> "
                   f"{_ms(step.after_ms)} ms, within {_ms(step.noise_ms)} ms (the larger spread "
                   "of either run's steps): no gain is shown")
    lines = [verdict] + _ops_lines(diff)
    if advice is not None:
        lines += _advice_lines(advice)
    lines += [f"note: {n}" for n in diff.notes]
    return Group(head, _changes_table(diff), _buckets_table(diff), Text("\n".join(lines)))
