"""Renderings of bucket plans and strategy comparisons, their advice and Chrome traces.

Tables are for reading; what to set in a framework is the advice decided in planning
(:mod:`tracecli.planning.advice`), returned as plain lines (:func:`plan_advice`,
:func:`.advice.advice_lines`) that the CLI prints whole, so a setting is never cut by a
table cell and can be pasted as it is.
"""

from __future__ import annotations

from typing import Optional

from rich.console import Group
from rich.text import Text

from ..planning import STRATEGIES
from ..units import format_size
from .advice import advice_lines, paste_lines
from .chrome import chrome_trace, complete_event
from .layout import NAME, WORD, Column, Fitted, with_rank
from .tables import format_ms as _ms, hidden_caption, plural, truncated

__all__ = ["plan_view", "compare_view", "plan_chrome_trace", "plan_advice"]


def plan_header(plan) -> Text:
    t, c = plan.timeline, plan.cost
    text = Text()
    text.append("Plan ", style="bold")
    sizes = format_size(sum(g.nbytes for g in plan.inp.grads))
    m = c.describe()
    of = ("of" if plan.inp.unit_gradients else "for")
    known = "; sizes known per bucket only" if plan.inp.unit_gradients else ""
    ranks = m.get("measured_on_gpus") or (m.get("fit") or {}).get("ranks")
    text.append(f"{plan.strategy}: {plural(len(t.buckets), 'bucket')} {of} "
                f"{plural(plan.inp.gradient_count, 'gradient')} ({sizes}{known}) on "
                f"{plural(c.gpus, 'GPU')}"
                + (" — measured, as the run did it" if plan.measured else
                   f" — predicted by a model measured on {ranks} ranks"
                   if ranks and ranks != c.gpus else "") + "\n")
    text.append(f"cost model: {c.summary()}\n")
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
    if plan.lower_bound_ms and plan.measured:
        text.append(f"\nlower bound {_ms(plan.lower_bound_ms)} ms (compute alone: no model "
                    f"bounds a measurement); this run is {t.iteration_ms / plan.lower_bound_ms:.3f}x "
                    "of it")
    elif plan.lower_bound_ms:
        text.append(f"\nlower bound {_ms(plan.lower_bound_ms)} ms; this plan is "
                    f"{t.iteration_ms / plan.lower_bound_ms:.3f}x of it")
    return text


def _span(names: list[str]) -> str:
    if not names:
        return "?"
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"


# Which columns move to a second table first when a table is too wide: the last named.
PLAN_ORDER = ("gradients", "bytes", "start", "end", "comm", "ready", "n", "NCCL algo/proto")
COMPARE_ORDER = ("iteration ms", "vs best", "exposed ms", "hidden", "buckets", "vs run (model)")


def plan_view(plan, top: Optional[int] = None) -> Group:
    rows = []
    picks = [None if plan.measured else plan.cost.algorithm_protocol(b.collective, b.nbytes)
             for b in plan.timeline.buckets]
    picked = any(picks)
    for b, pick in zip(plan.timeline.buckets, picks):
        rows.append([str(b.index), str(plan.inp.gradients_in(b.members)) if b.members else "?",
                     _span(plan.tensor_names(b.index)), format_size(b.nbytes), _ms(b.ready_ms),
                     _ms(b.start_ms), _ms(b.end_ms), _ms(b.duration_ms)]
                    + (["/".join(pick) if pick else "-"] if picked else []))
    shown, hidden = truncated(rows, top)
    cols = [Column("#", key=True), Column("n"), Column("gradients", NAME, min_width=20)]
    cols += [Column(h) for h in ("bytes", "ready", "start", "end", "comm")]
    cols += [Column("NCCL algo/proto", WORD)] if picked else []
    buckets = Fitted("Buckets in launch order (ms from the step's start)",
                     with_rank(cols, PLAN_ORDER), shown, hidden_caption(hidden, "bucket"))
    return Group(plan_header(plan), buckets, plan_summary(plan))


def plan_advice(plan, advice) -> list[str]:
    """The lines after a plan: the run's own settings for a measured plan, else the advice
    (what to set in each framework: :mod:`.advice`), whole lines."""
    if plan.measured:
        text = plan.settings.get("text") or "no framework setting reproduces this plan"
        if not plan.settings.get("framework"):
            return [text]
        return ["The run's own buckets:"] + paste_lines(text, "  ")  # each line pastes
    lines = [] if plan.settings.get("framework") else \
        ["No framework setting reproduces this plan's buckets."]
    return lines + advice_lines(advice, plan.cost.name)


def compare_view(rows, inp_plan) -> Group:
    as_run = _run_model(rows)
    cols = ["strategy", "buckets", "iteration ms", "exposed ms", "hidden", "vs best"]
    if as_run is not None:
        cols.append("vs run (model)")
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
    columns = [Column(cols[0], NAME, key=True)] + [Column(h) for h in cols[1:]]
    strategies = Fitted("Strategies, best first (settings to paste are below)",
                        with_rank(columns, COMPARE_ORDER), lines)
    why = [Text(f"{r.label}: {r.plan.notes[-1]}") for r in rows  # why a row beats optimal
           if r.label.endswith("(bounded)") and r.plan.notes]
    return Group(plan_header(inp_plan), strategies, *why)


def _run_model(rows):
    """The run's own buckets under the rows' model ("as run (model)"), or ``None``."""
    return next((r.plan for r in rows if not r.plan.measured
                 and getattr(STRATEGIES.get(r.plan.strategy), "from_run", False)), None)


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
