"""Renderings of FSDP runs and plans: units, and collectives in issue order with their unit,
phase and channel."""

from __future__ import annotations

from typing import Optional

from rich.console import Group
from rich.text import Text

from ..model.fsdp import FsdpRun, contract_name
from ..units import format_size
from .advice import paste_lines
from .tables import add_rows, format_ms, new_table, truncated, value_columns

__all__ = ["run_view", "fsdp_plan_view", "advice_lines"]


def _n(value: Optional[int]) -> str:
    return "-" if value is None else f"{value:,}"


def run_view(run: FsdpRun, top: Optional[int] = None) -> Group:
    """``inspect``'s FSDP part: the units, then every collective FSDP issued in the step."""
    title = (f"{run.system} units (forward order; {run.world_size} ranks = shard "
             f"{run.shard_size} x replicate {run.replicate_size})")
    units = new_table(title)
    units.add_column("unit", no_wrap=True)
    rows = []
    for u in run.units:
        mine = [c for c in run.comms if c.unit == u.name]
        forward = next((c.elements for c in mine if c.phase == "forward"
                        and contract_name(c.kind) == "allgather"), None)
        reduce = next((c.elements for c in mine if contract_name(c.kind) == "reducescatter"), None)
        rows.append([u.name, u.parent or "-", str(len(u.shard_numels)), _n(forward),
                     u.all_gather_dtype or "-", "-" if u.backward_group is None else str(u.backward_group),
                     _n(reduce), u.reduce_dtype or "-", "yes" if u.deferred else "no"])
    shown, hidden = truncated(rows, top)
    table = value_columns(units, ["in", "params", "all-gather", "dtype", "bwd group",
                                  "reduce-scatter", "dtype ", "at end"], shown, start=1)
    add_rows(units, shown, hidden, "unit")
    comms = new_table("Collectives FSDP issued, in issue order (ms from the step's start)")
    comms.add_column("#", justify="right", no_wrap=True)
    rows = []
    for k, c in enumerate(run.comms):
        took = None if c.start_ms is None or c.end_ms is None else c.end_ms - c.start_ms
        rows.append([str(k), c.phase, contract_name(c.kind), c.unit, _n(c.elements),
                     c.dtype or "?", _n(c.group_size), c.via, format_ms(c.launch_ms),
                     format_ms(c.start_ms), format_ms(took)])
    shown, hidden = truncated(rows, top)
    table2 = value_columns(comms, ["phase", "collective", "unit", "elements", "dtype", "group",
                                   "issued by", "launched", "ran", "took"], shown, start=1)
    add_rows(comms, shown, hidden, "collective")
    parts = [table, table2] + [Text(f"note: {n}") for n in run.notes]
    return Group(*parts)


def fsdp_plan_view(plan, top: Optional[int] = None) -> Group:
    """An FSDP plan: its collectives on their channels, then the step and the memory."""
    from .plans import plan_header, plan_summary

    table = new_table("Collectives in issue order (ms from the step's start)")
    table.add_column("#", justify="right", no_wrap=True)
    rows = []
    for b in plan.timeline.buckets:
        rows.append([str(b.index), b.phase or "-", contract_name(b.collective), b.unit or "-",
                     _n(b.elements), format_size(b.nbytes), b.dtype, _n(b.group),
                     format_ms(b.ready_ms), format_ms(b.start_ms), format_ms(b.end_ms),
                     format_ms(b.duration_ms)])
    shown, hidden = truncated(rows, top)
    buckets = value_columns(table, ["phase", "collective", "unit", "elements", "bytes", "dtype",
                                    "group", "ready", "start", "end", "comm"], shown, start=1)
    add_rows(table, shown, hidden, "collective")
    parts = [plan_header(plan), buckets, plan_summary(plan)]
    memory = plan.fsdp.memory if plan.fsdp is not None else None
    if memory is not None:
        parts.append(Text(f"memory per rank (parameters and gradients): {format_size(memory.sharded)} "
                          f"sharded, {format_size(memory.peak)} at peak"))
    return Group(*parts)


def advice_lines(rows) -> list[str]:
    """FSDP's verdicts of a comparison (``--compare`` on an FSDP run), whole lines."""
    import textwrap

    lines = []
    for r in rows:
        a = r.plan.fsdp.advice if r.plan.fsdp is not None else None
        if a is None:
            continue
        title = "PyTorch " + a.framework.split("-", 1)[-1].upper()
        budget = f" (budget {a.budget_gib:g} GiB)" if a.budget_gib is not None else ""
        head = (f"{title} tuned: {format_ms(a.best_ms)} ms, {format_size(a.best_peak_bytes)} per "
                f"GPU of parameters and gradients; its defaults {format_ms(a.default_ms)} ms, "
                f"{format_size(a.default_peak_bytes)}{budget}; DDP would hold "
                f"{format_size(a.ddp_bytes)}.")
        lines += textwrap.wrap(head, 80, subsequent_indent="  ")
        verdict = "Set:" if a.verdict == "set" else "Keep the defaults:"
        lines += textwrap.wrap(f"{verdict} {a.why}.", 80, subsequent_indent="  ")
        lines += paste_lines("\n".join(a.paste), "  ")
    return lines
