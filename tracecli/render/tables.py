"""Rich renderings for people. Each function returns renderables; the CLI prints them."""

from __future__ import annotations

import textwrap
from typing import Optional

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..analysis import Readiness, SizeReport
from ..model import Trace
from ..units import format_size

__all__ = ["inspect_view", "truncated", "add_rows", "format_ms", "plural", "new_table",
           "value_columns"]


def new_table(title: str) -> Table:
    """A compact table (a rule under the header, no vertical lines): names keep their room
    at 80 columns."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True)


def plural(n: int, word: str) -> str:
    """``1 bucket``, ``2 buckets``, ``1,000 GPUs``.

    >>> plural(1, "rank"), plural(3, "more bucket")
    ('1 rank', '3 more buckets')
    """
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _size(n: Optional[int]) -> str:
    return "?" if n is None else format_size(n)


def format_ms(x: Optional[float]) -> str:
    """Milliseconds for tables; ``-`` when unknown."""
    return "-" if x is None else f"{x:,.3f}"


DEFAULT_ROWS = 1000  # without --top: past this a table goes unread, and takes rich seconds


def truncated(rows: list, top: Optional[int]) -> tuple[list, int]:
    """The first ``top`` rows (without ``--top``, the first :data:`DEFAULT_ROWS`) and how
    many were left out."""
    limit = DEFAULT_ROWS if top is None else top
    if limit >= len(rows):
        return rows, 0
    return rows[:limit], len(rows) - limit


def add_rows(table: Table, shown: list[list[str]], hidden: int, noun: str) -> None:
    """Add the rows :func:`truncated` kept; a caption says how many ``noun`` it left out."""
    for row in shown:
        table.add_row(*row)
    if hidden:
        table.caption = f"{plural(hidden, 'more ' + noun)} (--top N shows N; --json has them all)"


def value_columns(table: Table, headers: list[str], rows: list[list[str]], start: int = 0) -> "Whole":
    """Right-aligned columns for ``rows[*][start:]`` that never cut a value: each is at least
    as wide as its widest value (a long header wraps instead). Returns the table to print."""
    for i, header in enumerate(headers, start):
        width = max((len(row[i]) for row in rows), default=1)
        table.add_column(header, justify="right", overflow="fold", min_width=width)
    return Whole(table, len(headers))


class Whole:
    """A table printed with every column and every value whole where the width allows.
    Too wide for the terminal, it gives up room in this order: the headers wider than their
    values wrap (the widest first), then the other columns (names) wrap, and only when even
    that does not fit do the last ``values`` columns wrap their values onto a second line.
    (Left alone, rich narrows the widest columns first, values included, and cuts them.)"""

    def __init__(self, table: Table, values: int):
        self.table = table
        self.values = values

    def _fits(self, console, options, bound: str) -> bool:
        return getattr(self.table.__rich_measure__(console, options), bound) <= options.max_width

    def __rich_console__(self, console, options):
        columns = self.table.columns
        names, values = columns[:len(columns) - self.values], columns[len(columns) - self.values:]
        if not self._fits(console, options, "maximum"):
            for column in values:
                column.no_wrap = bool(column.min_width)
            self._wrap_headers(console, options, values)
            if not self._fits(console, options, "maximum"):
                for column in names:
                    column.min_width, column.no_wrap = None, False
                if not self._fits(console, options, "minimum"):
                    for column in values:
                        column.min_width, column.no_wrap = None, False
        yield self.table

    def _wrap_headers(self, console, options, columns) -> None:
        spare = sorted((c for c in columns if c.min_width), reverse=True,
                       key=lambda c: len(str(c.header)) - c.min_width)
        for column in spare:
            if self._fits(console, options, "maximum"):
                return
            header = str(column.header)
            width = max([column.min_width] + [len(w) for w in header.split()])
            column.header = "\n".join(textwrap.wrap(header, width))


def summary(trace: Trace, sizes: SizeReport) -> Text:
    kinds = ", ".join(f"{k} {v:,}" for k, v in trace.counts().items())
    text = Text()
    text.append("Trace ", style="bold")
    text.append(f"{trace.path} ({trace.format})\n")
    text.append(f"ops {len(trace.ops()):,}: {kinds}\n")
    text.append(f"tensors {len(trace.tensors()):,}; parameters {sizes.parameters:,}")
    if sizes.parameter_bytes is not None:
        text.append(f" = {_size(sizes.parameter_bytes)} ({sizes.parameter_bytes:,} bytes)")
    if sizes.parameter_elements:
        text.append(f", {sizes.parameter_elements:,} elements")
    if sizes.activation_bytes is not None:
        text.append(f"; activations {sizes.activations:,} = {_size(sizes.activation_bytes)}")
    for note in trace.meta.notes:
        text.append(f"\n{note}")
    hint = trace.abilities.sizes_hint
    if hint:
        known = sizes.parameters and sizes.parameter_bytes is not None
        where = trace.meta.sizes or "recorded in the trace"
        if not known and 0 < sizes.known < sizes.gradients:
            text.append(f"\nsizes: known for {sizes.known} of {sizes.gradients} gradients "
                        f"({where}); unknown for {sizes.gradients - sizes.known} ({hint})")
        else:
            text.append("\nsizes: " + (trace.meta.sizes or ("recorded in the trace" if known
                                                                     else f"unknown ({hint})")))
    return text


def readiness_table(ready: Readiness, top: Optional[int], per_gradient: bool,
                    details: Optional[dict] = None) -> Table:
    title = f"Gradient readiness during backward — {ready.method}"
    sources = {g.source for g in ready.gradients}
    by_column = per_gradient and len(sources) > 1  # one source for all: said in the title
    if per_gradient and len(sources) == 1:
        title += f" (ready by: {sources.pop()})"
    table = new_table(title)
    table.add_column("#", justify="right", overflow="fold")
    table.add_column("layer" if not per_gradient else "gradient", overflow="fold", min_width=20)
    if per_gradient:
        table.add_column("shape", overflow="fold")
    else:
        table.add_column("tensors", justify="right", overflow="fold")
    for col in ("bytes", "cumulative", "bwd op"):
        table.add_column(col, justify="right", overflow="fold")
    if by_column:
        table.add_column("ready by", overflow="fold")
    table.add_column("ready ms", justify="right", overflow="fold")
    cumulative: Optional[int] = 0
    rows = []
    items = ready.gradients if per_gradient else ready.layers
    details = details or {}
    first_of_layer = {}
    for g in ready.gradients:
        first_of_layer.setdefault(g.layer, g.tensor_id)
    for item in items:
        cumulative = None if cumulative is None or item.nbytes is None else cumulative + item.nbytes
        if per_gradient:
            info = details.get(item.tensor_id, {})
            shape = info.get("shape") or item.shape
            rows.append([str(item.ready_index), item.name + (" [sparse]" if item.sparse else ""),
                         "x".join(map(str, shape)) if shape else "-",
                         _size(item.nbytes), _size(cumulative), str(item.backward_position)]
                        + ([item.source] if by_column else []) + [format_ms(info.get("ready_ms"))])
        else:
            info = details.get(first_of_layer.get(item.name), {})
            rows.append([str(item.ready_index), item.name, str(len(item.tensors)),
                         _size(item.nbytes), _size(cumulative), str(item.backward_position),
                         format_ms(info.get("ready_ms"))])
    shown, hidden = truncated(rows, top)
    add_rows(table, shown, hidden, "row")
    return table


def collectives_table(trace: Trace, top: Optional[int]) -> Table:
    """The collectives the traced run executed, step by step (ms from each step's start)."""
    table = new_table("Collectives of the run (ms from each step's start)")
    for col in ("step", "kind", "purpose", "elements", "bytes", "dtype", "launched", "ran",
                "ended", "took"):
        table.add_column(col, justify="left" if col in ("kind", "purpose", "dtype") else "right")
    rows = []
    for c in trace.collectives():
        took = None if c.start_ms is None or c.end_ms is None else c.end_ms - c.start_ms
        rows.append(["-" if c.step is None else str(c.step), c.kind.value, c.purpose.value,
                     "?" if c.elements is None else f"{c.elements:,}", _size(c.nbytes),
                     c.dtype or "?", format_ms(c.launch_ms), format_ms(c.start_ms),
                     format_ms(c.end_ms), format_ms(took)])
    shown, hidden = truncated(rows, top)
    add_rows(table, shown, hidden, "collective")
    return table


def statistics_table(sizes: SizeReport, trace_hint: str = "") -> Table:
    table = new_table("Gradient sizes")
    for col in ("count", "min", "median", "mean", "max", "total"):
        table.add_column(col, justify="right")
    if not sizes.known:
        table.add_row(str(sizes.gradients), *["?"] * 5)
        table.caption = "sizes unknown" + (" (see sizes: above)" if trace_hint else "")
        return table
    table.add_row(str(sizes.gradients), _size(sizes.min), _size(sizes.median),
                  _size(sizes.mean), _size(sizes.max), _size(sizes.total))
    return table


def histogram_table(sizes: SizeReport) -> Table:
    table = new_table("Gradients by size class")
    table.add_column("size class")
    table.add_column("count", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("")
    most = max((c.count for c in sizes.histogram), default=1)
    for c in sizes.histogram:
        label = "0 B" if c.low == 0 else f"{format_size(c.low)} – {format_size(c.high)}"
        table.add_row(label, str(c.count), _size(c.nbytes), "█" * max(1, round(20 * c.count / most)))
    return table


def inspect_view(trace: Trace, ready: Readiness, sizes: SizeReport, top: Optional[int] = None,
                 per_gradient: bool = False, details: Optional[dict] = None,
                 compute_source: Optional[str] = None) -> Group:
    per_gradient = per_gradient or not ready.layers  # no layer names: one row a gradient
    parts = [summary(trace, sizes), readiness_table(ready, top, per_gradient, details)]
    parts.append(Text("ready ms: " + (compute_source or "unknown (pass --backward-ms MS or "
                                                         "--op-times FILE)")))
    if trace.collectives():
        parts.append(collectives_table(trace, top))
    if trace.meta.fsdp is not None:
        from .fsdp import run_view

        parts.append(run_view(trace.meta.fsdp, top))
    parts.append(statistics_table(sizes, trace.abilities.sizes_hint))
    if sizes.histogram:
        parts.append(histogram_table(sizes))
    if ready.without_gradient:
        parts.append(Text(f"parameters without a gradient: {', '.join(ready.without_gradient)}"))
    return Group(*parts)
