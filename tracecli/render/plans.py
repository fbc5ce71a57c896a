"""Renderings of bucket plans and strategy comparisons, their advice and Chrome traces.

Tables are for reading; what to set in a framework is returned separately as plain lines
(:func:`plan_advice`, :func:`compare_advice`) that the CLI prints whole, so a setting is
never cut by a table cell and can be pasted as it is.
"""

from __future__ import annotations

from typing import Optional

from rich.console import Group
from rich.text import Text

from ..planning import STRATEGIES
from ..planning.plan import is_default
from ..units import format_size
from .chrome import chrome_trace, complete_event
from .tables import add_rows, format_ms as _ms, new_table, plural, truncated, value_columns

__all__ = ["plan_view", "compare_view", "plan_chrome_trace", "plan_advice", "compare_advice"]


def plan_header(plan) -> Text:
    t, c = plan.timeline, plan.cost
    text = Text()
    text.append("Plan ", style="bold")
    sizes = format_size(sum(g.nbytes for g in plan.inp.grads))
    text.append(f"{plan.strategy}: {plural(len(t.buckets), 'bucket')} for "
                f"{plural(len(plan.inp.grads), 'gradient')} ({sizes}) on {plural(c.gpus, 'GPU')}"
                + (" — measured, as the run did it" if plan.measured else "") + "\n")
    m = c.describe()
    text.append(f"cost model: {m['name']} {m['algorithm']}, alpha {m['alpha_us']:g} us, bus "
                f"bandwidth {m['bandwidth_gbps']:g} GB/s"
                + (f", launch {m['launch_us']:g} us" if m['launch_us'] else "")
                + f" — {m['source']}\n")
    text.append(f"compute: forward {_ms(t.forward_ms)} ms, backward "
                f"{_ms(t.backward_end_ms - t.forward_ms)} ms — {plan.inp.compute_source}")
    for note in plan.notes:
        text.append(f"\nnote: {note}", style="yellow")
    return text


def plan_summary(plan) -> Text:
    t = plan.timeline
    text = Text()
    text.append(f"iteration {_ms(t.iteration_ms)} ms = compute {_ms(t.compute_ms)} ms + exposed "
                f"communication {_ms(t.exposed_comm_ms)} ms; communication {_ms(t.comm_ms)} ms, "
                f"{t.overlap_pct:.1f}% hidden")
    if plan.lower_bound_ms:
        text.append(f"\nlower bound {_ms(plan.lower_bound_ms)} ms; this plan is "
                    f"{t.iteration_ms / plan.lower_bound_ms:.3f}x of it")
    return text


def _span(names: list[str]) -> str:
    if not names:
        return "?"
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"


def plan_view(plan, top: Optional[int] = None) -> Group:
    table = new_table("Buckets in launch order (ms from the step's start)")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("gradients", overflow="fold", min_width=20, ratio=1)
    rows = []
    for b in plan.timeline.buckets:
        rows.append([str(b.index), str(len(b.members)) if b.members else "?",
                     _span(plan.tensor_names(b.index)), format_size(b.nbytes), _ms(b.ready_ms),
                     _ms(b.start_ms), _ms(b.end_ms), _ms(b.duration_ms)])
    shown, hidden = truncated(rows, top)
    buckets = value_columns(table, ["bytes", "ready", "start", "end", "comm"], shown, start=3)
    add_rows(table, shown, hidden, "bucket")
    return Group(plan_header(plan), buckets, plan_summary(plan))


def plan_advice(plan) -> list[str]:
    """What to set to get ``plan``, whole lines."""
    text = plan.settings.get("text") or "no framework setting reproduces this plan"
    if plan.measured:
        return [f"The run's own buckets: {text}" if plan.settings.get("framework") else text]
    if not plan.settings.get("framework"):
        return [f"To get this plan: {text}"]
    return ["To get this plan, set:", f"  {text}"]


def compare_view(rows, inp_plan) -> Group:
    table = new_table("Strategies, best first (settings to paste are below)")
    as_run = rows[0].plan if rows and rows[0].plan.measured else None
    cols = ["strategy", "buckets", "iteration ms", "exposed ms", "hidden", "vs best"]
    if as_run is not None:
        cols.append("vs as run")
    table.add_column(cols[0], no_wrap=True)
    predicted = [r.plan.timeline.iteration_ms for r in rows if not r.plan.measured]
    best = min(predicted) if predicted else None
    lines = []
    for r in rows:
        t = r.plan.timeline
        cells = [r.label, str(len(r.plan.buckets)), _ms(t.iteration_ms), _ms(t.exposed_comm_ms),
                 f"{t.overlap_pct:.1f}%", f"{t.iteration_ms / best:.3f}x" if best else "-"]
        if as_run is not None:
            base = as_run.timeline.iteration_ms
            cells.append(f"{100.0 * (t.iteration_ms - base) / base:+.1f}%" if base else "-")
        lines.append(cells)
    strategies = value_columns(table, cols[1:], lines, start=1)
    for cells in lines:
        table.add_row(*cells)
    return Group(plan_header(inp_plan), strategies)


def _pct(a: float, b: float) -> str:
    return f"{100.0 * (a - b) / b:+.1f}%" if b else "-"


def compare_advice(rows) -> list[str]:
    """Per framework, the best setting found and what its defaults cost: whole lines."""
    predicted = [r for r in rows if not r.plan.measured]
    as_run = rows[0].plan if rows and rows[0].plan.measured else None
    lines = ["What to set (predicted iteration; framework defaults beside):"]

    def best(*strategies):
        found = [r for r in predicted if r.plan.strategy in strategies and r.plan.settings.get("framework")]
        return min(found, key=lambda r: r.plan.timeline.iteration_ms) if found else None

    def default(strategy):
        found = [r for r in predicted if r.plan.strategy == strategy and is_default(r.plan)]
        return found[0].plan.timeline.iteration_ms if found else None

    ddp = best("ddp")
    for spec in STRATEGIES.values():  # each framework with a title, in the registry's order
        row, base = best(spec.name), default(spec.name)
        if spec.title is None or row is None:
            continue
        ms = row.plan.timeline.iteration_ms
        head = f"  {spec.title}: {_ms(ms)} ms"
        if base is not None:
            head += f"; default {_ms(base)} ms ({_pct(ms, base)})" if abs(ms - base) > 1e-9 \
                else " (the default is best)"
        if as_run is not None:
            head += f"; the run {_pct(ms, as_run.timeline.iteration_ms)}"
        lines += [head, f"    {row.plan.settings['text']}"]
    optimal = next((r for r in predicted if r.plan.strategy == "optimal"), None)
    if optimal is not None and optimal.plan.settings.get("framework"):
        ms = optimal.plan.timeline.iteration_ms
        head = f"  Optimal plan, per-bucket caps (torch >= 2.13): {_ms(ms)} ms"
        if ddp is not None:
            head += f"; best bucket_cap_mb {_pct(ms, ddp.plan.timeline.iteration_ms)}"
        lines += [head, f"    {optimal.plan.settings['text']}"]
    if len(lines) == 1:
        lines.append("  no framework setting reproduces these plans")
    return lines


def plan_chrome_trace(plan, backward_names: list[tuple[str, float]]) -> dict:
    """Compute track (forward, each backward op) and communication track (buckets)."""
    t = plan.timeline
    events = [complete_event("forward", 0.0, t.forward_ms, 1, 1, "compute")]
    clock = t.forward_ms
    for name, ms in backward_names:
        events.append(complete_event(name, clock, ms, 1, 1, "compute"))
        clock += ms
    for b in t.buckets:
        names = plan.tensor_names(b.index) or ["?"]
        events.append(complete_event(
            f"bucket {b.index} ({format_size(b.nbytes)})", b.start_ms, b.duration_ms, 1, 2,
            b.collective.value, {"tensors": len(b.members), "bytes": b.nbytes, "ready_ms": b.ready_ms,
                          "first": names[0], "last": names[-1]}))
    return chrome_trace(events, {(1, 1): "compute (predicted)", (1, 2): "all-reduce (predicted)"},
                        {1: f"tracecli plan: {plan.strategy}"})
