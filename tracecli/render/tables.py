"""Rich renderings for people. Each function returns renderables; the CLI prints them."""

from __future__ import annotations

from typing import Optional

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..analysis import Readiness, SizeReport
from ..model import Trace
from ..units import format_size
from .layout import NAME, VALUE, WORD, Column, Fitted, with_rank

__all__ = ["inspect_view", "truncated", "add_rows", "hidden_caption", "format_ms", "plural",
           "new_table", "value_columns"]


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
    """Right-aligned value columns for ``rows[*][start:]`` added to ``table``; returns the
    table to print, laid out by :class:`~.layout.Fitted` (values never cut or split; the
    columns before ``start`` are names or words, the first of them the key; the
    rightmost columns move to a second table first). New tables build a
    :class:`~.layout.Fitted` with their own order of importance instead."""
    for header in headers:
        table.add_column(header, justify="right")
    return Whole(table, len(headers))


class Whole:
    """A rich table (rows added after :func:`value_columns`) printed as a
    :class:`~.layout.Fitted`: its last ``values`` columns are values, the others names
    (wrapping) or, where ``no_wrap``, words and numbers."""

    def __init__(self, table: Table, values: int):
        self.table = table
        self.values = values

    def fitted(self) -> Fitted:
        n = len(self.table.columns)
        cols = []
        for k, c in enumerate(self.table.columns):
            if k >= n - self.values or (c.no_wrap and c.justify == "right"):
                kind = VALUE
            else:
                kind = WORD if c.no_wrap else NAME
            cols.append(Column(str(c.header), kind, rank=k, key=k == 0, justify=c.justify,
                               min_width=c.min_width if kind == NAME else None))
        rows = [list(r) for r in zip(*(map(str, c._cells) for c in self.table.columns))]
        return Fitted(str(self.table.title or ""), cols, rows,
                      str(self.table.caption) if self.table.caption else None)

    def __rich_console__(self, console, options):
        yield self.fitted()

    def __rich_measure__(self, console, options):
        return self.fitted().__rich_measure__(console, options)


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


def hidden_caption(hidden: int, noun: str) -> Optional[str]:
    """What :func:`truncated` left out, for a table's caption (``None``: nothing)."""
    if not hidden:
        return None
    return f"{plural(hidden, 'more ' + noun)} (--top N shows N; --json has them all)"


# Which columns move to a second table first when a table is too wide: the last named.
READINESS_ORDER = ("gradient", "layer", "bytes", "ready ms", "shape", "tensors", "ready by",
                   "bwd op", "cumulative")
COLLECTIVES_ORDER = ("step", "kind", "purpose", "bytes", "ran", "took", "ended", "launched",
                     "dtype", "elements")


def readiness_table(ready: Readiness, top: Optional[int], per_gradient: bool,
                    details: Optional[dict] = None) -> Fitted:
    title = f"Gradient readiness during backward — {ready.method}"
    sources = {g.source for g in ready.gradients}
    by_column = per_gradient and len(sources) > 1  # one source for all: said in the title
    if per_gradient and len(sources) == 1:
        title += f" (ready by: {sources.pop()})"
    cols = [Column("#", key=True), Column("gradient" if per_gradient else "layer", NAME,
                                          min_width=20)]
    cols.append(Column("shape", WORD) if per_gradient else Column("tensors"))
    cols += [Column("bytes"), Column("cumulative"), Column("bwd op")]
    if by_column:
        cols.append(Column("ready by", WORD))
    cols.append(Column("ready ms"))
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
    return Fitted(title, with_rank(cols, READINESS_ORDER), shown, hidden_caption(hidden, "row"))


def collectives_table(trace: Trace, top: Optional[int]) -> Fitted:
    """The collectives the traced run executed, step by step (ms from each step's start)."""
    cols = [Column(h, WORD if h in ("kind", "purpose", "dtype") else VALUE)
            for h in ("step", "kind", "purpose", "elements", "bytes", "dtype", "launched", "ran",
                      "ended", "took")]
    rows = []
    for c in trace.collectives():
        took = None if c.start_ms is None or c.end_ms is None else c.end_ms - c.start_ms
        rows.append(["-" if c.step is None else str(c.step), c.kind.value, c.purpose.value,
                     "?" if c.elements is None else f"{c.elements:,}", _size(c.nbytes),
                     c.dtype or "?", format_ms(c.launch_ms), format_ms(c.start_ms),
                     format_ms(c.end_ms), format_ms(took)])
    shown, hidden = truncated(rows, top)
    return Fitted("Collectives of the run (ms from each step's start)",
                  with_rank(cols, COLLECTIVES_ORDER), shown, hidden_caption(hidden, "collective"))


def statistics_table(sizes: SizeReport, trace_hint: str = "") -> Fitted:
    cols = [Column(h) for h in ("count", "min", "median", "mean", "max", "total")]
    if not sizes.known:
        return Fitted("Gradient sizes", cols, [[str(sizes.gradients), *["?"] * 5]],
                      "sizes unknown" + (" (see sizes: above)" if trace_hint else ""))
    return Fitted("Gradient sizes", cols, [[str(sizes.gradients), _size(sizes.min),
                                            _size(sizes.median), _size(sizes.mean),
                                            _size(sizes.max), _size(sizes.total)]])


def histogram_table(sizes: SizeReport) -> Fitted:
    cols = [Column("size class", VALUE, key=True, justify="left"), Column("count"),
            Column("bytes"), Column("", WORD)]
    most = max((c.count for c in sizes.histogram), default=1)
    rows = []
    for c in sizes.histogram:
        label = "0 B" if c.low == 0 else f"{format_size(c.low)} – {format_size(c.high)}"
        rows.append([label, str(c.count), _size(c.nbytes),
                     "█" * max(1, round(20 * c.count / most))])
    return Fitted("Gradients by size class", cols, rows)


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
