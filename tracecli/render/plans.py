"""Rich renderings of bucket plans and strategy comparisons, and their Chrome traces."""

from __future__ import annotations

from typing import Optional

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..units import format_size
from .chrome import chrome_trace, complete_event
from .tables import format_ms as _ms, truncated

__all__ = ["plan_view", "compare_view", "plan_chrome_trace"]



def plan_header(plan) -> Text:
    t, c = plan.timeline, plan.cost
    text = Text()
    text.append("Plan ", style="bold")
    text.append(f"{plan.strategy}: {len(t.buckets)} buckets for {len(plan.inp.grads)} gradients "
                f"({format_size(sum(g.nbytes for g in plan.inp.grads))}) on {c.gpus} GPUs\n")
    text.append(f"cost model: {c.name} {c.algorithm}, alpha {c.alpha_us:g} us, bus bandwidth "
                f"{c.bandwidth_gbps:g} GB/s" + (f", launch {c.launch_us:g} us" if c.launch_us else "")
                + f" — {c.source}\n")
    text.append(f"compute: forward {_ms(t.forward_ms)} ms, backward "
                f"{_ms(t.backward_end_ms - t.forward_ms)} ms — {plan.inp.compute_source}")
    return text


def plan_summary(plan) -> Text:
    t = plan.timeline
    text = Text()
    text.append(f"iteration {_ms(t.iteration_ms)} ms = compute {_ms(t.compute_ms)} ms + exposed "
                f"communication {_ms(t.exposed_comm_ms)} ms; communication {_ms(t.comm_ms)} ms, "
                f"{t.overlap_pct:.1f}% hidden\n")
    if plan.lower_bound_ms:
        text.append(f"lower bound {_ms(plan.lower_bound_ms)} ms; this plan is "
                    f"{t.iteration_ms / plan.lower_bound_ms:.3f}x of it\n")
    text.append(f"set: {plan.settings.get('text')}")
    return text


def plan_view(plan, top: Optional[int] = None) -> Group:
    table = Table(title="Buckets (launch order)", title_justify="left")
    for col in ("#", "tensors", "first", "last", "bytes", "ready ms", "start ms", "end ms", "comm ms"):
        table.add_column(col, justify="left" if col in ("first", "last") else "right")
    rows = []
    for b in plan.timeline.buckets:
        names = plan.tensor_names(b.index)
        rows.append([str(b.index), str(len(names)), names[0], names[-1], format_size(b.nbytes),
                     _ms(b.ready_ms), _ms(b.start_ms), _ms(b.end_ms), _ms(b.duration_ms)])
    shown, hidden = truncated(rows, top)
    for row in shown:
        table.add_row(*row)
    if hidden:
        table.caption = f"{hidden} more buckets (--top to show more)"
    return Group(plan_header(plan), table, plan_summary(plan))


def compare_view(rows, inp_plan) -> Group:
    table = Table(title="Strategies, best first", title_justify="left")
    as_run = rows[0].plan if rows and rows[0].plan.measured else None
    cols = ["strategy", "buckets", "iteration ms", "exposed ms", "hidden", "vs best"]
    if as_run is not None:
        cols.append("vs as run")
    for col in cols + ["settings"]:
        table.add_column(col, justify="left" if col in ("strategy", "settings") else "right")
    predicted = [r.plan.timeline.iteration_ms for r in rows if not r.plan.measured]
    best = min(predicted) if predicted else None
    for r in rows:
        t = r.plan.timeline
        cells = [r.label, str(len(r.plan.buckets)), _ms(t.iteration_ms), _ms(t.exposed_comm_ms),
                 f"{t.overlap_pct:.1f}%", f"{t.iteration_ms / best:.3f}x" if best else "-"]
        if as_run is not None:
            base = as_run.timeline.iteration_ms
            cells.append(f"{100.0 * (t.iteration_ms - base) / base:+.1f}%" if base else "-")
        table.add_row(*cells, r.plan.settings.get("text", ""))
    return Group(plan_header(inp_plan), table)


def plan_chrome_trace(plan, backward_names: list[tuple[str, float]]) -> dict:
    """Compute track (forward, each backward op) and communication track (buckets)."""
    t = plan.timeline
    events = [complete_event("forward", 0.0, t.forward_ms, 1, 1, "compute")]
    clock = t.forward_ms
    for name, ms in backward_names:
        events.append(complete_event(name, clock, ms, 1, 1, "compute"))
        clock += ms
    for b in t.buckets:
        names = plan.tensor_names(b.index)
        events.append(complete_event(
            f"bucket {b.index} ({format_size(b.nbytes)})", b.start_ms, b.duration_ms, 1, 2,
            "allreduce", {"tensors": len(names), "bytes": b.nbytes, "ready_ms": b.ready_ms,
                          "first": names[0], "last": names[-1]}))
    return chrome_trace(events, {(1, 1): "compute (predicted)", (1, 2): "all-reduce (predicted)"},
                        {1: f"tracecli plan: {plan.strategy}"})
