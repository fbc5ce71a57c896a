"""Tables that fit: every value whole, at any width down to 80 columns.

A table is given as columns (:class:`Column`) and rows of strings, and laid out for the
width it is printed at. When its natural width (every cell on one line) does not fit, it
gives up room in this order, and never by splitting or cutting a value:

1. headers wider than their values wrap, between words only (the widest first);
2. names (:data:`NAME` columns: gradients, layers) wrap by :func:`wrap_name`, down to
   :data:`NAME_MIN` characters;
3. whole columns move to a second table, least important first (the order each table
   states with ``rank``); the second table repeats the first's key columns (or, where a
   table has none, both get a ``row`` number) so each row can be found in both, and is
   laid out the same way (and split again if it must).

Values (:data:`VALUE`, right-aligned: numbers with their units, percentages, bands) and
words (:data:`WORD`, left-aligned: kinds, dtypes, algorithms) are never split: each such
column is at least as wide as its widest cell. Below the narrowest width the most important
column and the keys need, rich folds what it must; nothing here raises.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, replace
from typing import Optional, Sequence

from rich import box
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "Fitted", "VALUE", "WORD", "NAME", "NAME_MIN", "wrap_name", "table_width",
           "with_rank", "Prose", "fit_prose", "wrap_plain"]

VALUE, WORD, NAME = "value", "word", "name"
NAME_MIN = 12  # a name column keeps at least this many characters a line
_BREAKS = (" ", "/.", "_-,:]")  # where a name wraps, the first that fits of these


@dataclass(frozen=True)
class Column:
    """One column: its header, what it holds, and how important it is.

    ``rank``: lower is more important; when the table is too wide, columns of the highest
    rank move to a second table first (ties: the rightmost first). ``key``: repeated in
    every part of a split table (row labels: a bucket's ``#``, a step, a rank)."""

    header: str
    kind: str = VALUE
    rank: int = 0
    key: bool = False
    justify: Optional[str] = None
    min_width: Optional[int] = None

    @property
    def align(self) -> str:
        return self.justify or ("right" if self.kind == VALUE else "left")


def _cut(name: str, width: int) -> tuple[str, str]:
    """Where ``name`` (longer than ``width``) breaks: the first line and the rest."""
    for marks in _BREAKS:
        for p in range(min(width, len(name) - 1), 0, -1):
            if marks == " ":
                if name[p] != " ":
                    continue
                head, rest = name[:p].rstrip(), name[p + 1:].lstrip()
            elif name[p - 1] in marks:
                head, rest = name[:p], name[p:]
            else:
                continue
            if head and not (len(rest) <= width and (len(rest) <= 2 or rest.isdigit())):
                return head, rest
    return name[:width], name[width:]


def wrap_name(name: str, width: int) -> list[str]:
    """``name`` in lines of at most ``width``: broken at the last space that fits, else
    after the last ``/`` or ``.`` that fits, else after the last ``_ - , : ]``, never
    leaving a last line of two characters or of digits alone (``gamma:`` / ``0``); a part
    with no such place is cut at ``width``. Nothing is dropped or added (but the spaces it
    breaks at).

    >>> wrap_name("/predictor/conv4_3/b .. /predictor/conv1_1/b", 24)
    ['/predictor/conv4_3/b ..', '/predictor/conv1_1/b']
    >>> wrap_name("conv5_block3_3_bn/gamma:0", 24)
    ['conv5_block3_3_bn/', 'gamma:0']
    >>> wrap_name("layer4.1.downsample.0.weight", 12)
    ['layer4.1.', 'downsample.', '0.weight']
    """
    width = max(1, width)
    lines = []
    while len(name) > width:
        head, name = _cut(name, width)
        lines.append(head)
    return lines + [name]


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def table_width(widths: Sequence[int]) -> int:
    """The printed width of a :func:`~.tables.new_table` with columns of these content
    widths: the box's edges and the collapsed padding (two spaces between columns, two at
    each edge)."""
    return sum(widths) + 2 * len(widths) + 2


class Fitted:
    """A table laid out for the width it is printed at (see the module's docstring)."""

    def __init__(self, title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]],
                 caption: Optional[str] = None):
        self.title, self.columns, self.caption = title, list(columns), caption
        self.rows = [[str(c) for c in row] for row in rows]
        if not any(c.key for c in self.columns):  # a row number, shown only when split
            self.columns = [Column("row", VALUE, rank=-1, key=True)] + self.columns
            self.rows = [[str(k + 1)] + row for k, row in enumerate(self.rows)]
            self._numbered = True
        else:
            self._numbered = False

    # -- layout ------------------------------------------------------------------------

    def _cells(self, i: int) -> list[str]:
        return [row[i] for row in self.rows]

    def _natural(self, i: int) -> int:
        c = self.columns[i]
        return max([len(c.header), c.min_width or 0] + [len(x) for x in self._cells(i)])

    def _fit(self, shown: list[int], width: int) -> Optional[tuple[list[int], list[str]]]:
        """Widths and headers of ``shown`` columns within ``width``, or ``None``."""
        cols = [self.columns[i] for i in shown]
        widths = [self._natural(i) for i in shown]
        headers = [c.header for c in cols]
        if table_width(widths) <= width:
            return widths, headers
        least = {k: max([len(x) for x in self._cells(i)] + [_longest_word(cols[k].header)])
                 for k, i in enumerate(shown) if cols[k].kind != NAME}
        for k in sorted(least, key=lambda k: least[k] - widths[k]):  # widest slack first
            if table_width(widths) <= width:
                break
            if least[k] < widths[k]:
                widths[k] = max(least[k], (cols[k].min_width or 0))
                headers[k] = "\n".join(textwrap.wrap(cols[k].header, widths[k],
                                                     break_long_words=False,
                                                     break_on_hyphens=False))
                widths[k] = max([widths[k]] + [len(line) for line in headers[k].split("\n")])
        names = [k for k, c in enumerate(cols) if c.kind == NAME]
        over = table_width(widths) - width
        if over <= 0:
            return widths, headers
        room = {k: widths[k] - max(NAME_MIN, _longest_word(cols[k].header)) for k in names}
        if sum(max(0, r) for r in room.values()) < over:
            return None
        for k in sorted(names, key=lambda k: -widths[k]):  # the widest name gives first
            give = min(over, max(0, room[k]))
            widths[k] -= give
            over -= give
        for k in names:
            headers[k] = "\n".join(textwrap.wrap(cols[k].header, widths[k],
                                                 break_long_words=False)) or cols[k].header
        return widths, headers

    def parts(self, width: int) -> list[tuple[list[int], list[int], list[str]]]:
        """The tables to print at ``width``: (column indices, widths, headers) each."""
        everything = list(range(len(self.columns)))
        if self._numbered:  # the row number only where the table splits
            fitted = self._fit(everything[1:], width)
            if fitted is not None:
                return [(everything[1:], *fitted)]
        return self._split(everything, width)

    def _split(self, shown: list[int], width: int) -> list[tuple[list[int], list[int], list[str]]]:
        keys = [i for i in shown if self.columns[i].key]
        movable = sorted((i for i in shown if not self.columns[i].key),
                         key=lambda i: (self.columns[i].rank, i))
        first = list(shown)
        moved: list[int] = []
        fitted = self._fit(first, width)
        while fitted is None and len(movable) > 1:
            out = movable.pop()
            first.remove(out)
            moved.append(out)
            fitted = self._fit(first, width)
        if fitted is None:  # narrower than the keys and one column: rich folds
            widths = [self._natural(i) for i in first]
            return [(first, widths, [self.columns[i].header for i in first])]
        if not moved:
            return [(first, *fitted)]
        rest = keys + sorted(moved)
        return [(first, *fitted)] + self._split(rest, width)

    # -- rendering ---------------------------------------------------------------------

    def tables(self, width: int) -> list[Table]:
        parts = self.parts(width)
        out = []
        for n, (shown, widths, headers) in enumerate(parts):
            title = self.title if n == 0 else "continued"
            table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD,
                          collapse_padding=True)
            for i, w, header in zip(shown, widths, headers):
                c = self.columns[i]
                table.add_column(header, justify=c.align, no_wrap=True, min_width=w,
                                 overflow="fold")
            for row in self.rows:
                cells = []
                for i, w in zip(shown, widths):
                    text = row[i]
                    if self.columns[i].kind == NAME and len(text) > w:
                        text = "\n".join(wrap_name(text, w))
                    cells.append(text)
                table.add_row(*cells)
            if n == 0:
                moved = [self.columns[i].header for p in parts[1:] for i in p[0]
                         if i not in shown]
                lines = [self.caption] if self.caption else []
                if moved:  # a column's name is never split across lines
                    lines += _pack(["continued below, to fit:"] + [
                        f"{h}," for h in moved[:-1]] + moved[-1:], table_width(widths) - 2)
                table.caption = "\n".join(lines) or None
            out.append(table)
        return out

    def __rich_console__(self, console, options):
        yield from self.tables(options.max_width)

    def __rich_measure__(self, console, options):
        shown = list(range(1 if self._numbered else 0, len(self.columns)))
        natural = table_width([self._natural(i) for i in shown])
        return Measurement(min(natural, options.max_width), min(natural, options.max_width))


def with_rank(columns: Sequence[Column], order: Sequence[str]) -> list[Column]:
    """``columns`` with ranks from ``order`` (headers, most important first)."""
    rank = {h: k for k, h in enumerate(order)}
    return [replace(c, rank=rank.get(c.header, len(order))) for c in columns]


# -- prose ---------------------------------------------------------------------------

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "GB/s", "Gb/s", "TB/s",
          "MB/s", "TFLOP/s", "ms", "us", "ns", "s", "%")
_GLUE = re.compile(r"(?<=\d) (?=(?:%s)(?![\w/]))" % "|".join(re.escape(u) for u in _UNITS))


def _glued(plain: str) -> str:
    """``plain`` with the space between a number and its unit made a letter, so that a
    line never breaks there (same length, for rich's own line breaking)."""
    return _GLUE.sub("~", plain)


_LONE = re.compile(r"[(+-]?[\d.,]+(%|x|[A-Za-z/]{1,7})?[),;:.]?")  # a value alone on a line


def _breaks(plain: str, width: int, hang: int) -> list[int]:
    """Where ``plain`` breaks into lines: the first at most ``width``, later ones at most
    ``width - hang``; at spaces as rich breaks them, never between a number and its unit,
    and never leaving a value alone on the last line (``0.1)``: a word goes down with it)."""
    from rich._wrap import divide_line

    glued, offsets, start = _glued(plain), [], 0
    while True:
        room = max(1, width - (hang if offsets else 0))
        cuts = divide_line(glued[start:], room)
        if not cuts:
            return offsets
        cut = start + cuts[0]
        if len(cuts) == 1 and _LONE.fullmatch(plain[cut:].strip()):
            word = plain[:cut].rstrip().rfind(" ") + 1
            if word > start and plain[start:word].strip():
                cut = word
        offsets.append(cut)
        start = cut


def _hang(line: str) -> int:
    """How far a wrapped line's later lines are indented: two more than the line, where
    it is indented (a list's item); not at all where it is not."""
    indent = len(line) - len(line.lstrip(" "))
    return indent + 2 if indent else 0


def wrap_plain(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` (a word longer than that is folded), broken
    at spaces as rich breaks them but never between a number and its unit, nor before a
    value left alone; lines after the first start with ``indent``.

    >>> wrap_plain("took 16.0 MiB in 3 ms", 14)
    ['took 16.0 MiB', 'in 3 ms']
    >>> wrap_plain("25.3 against 0.1)", 14)
    ['25.3', 'against 0.1)']
    """
    cuts = [0] + _breaks(text, width, len(indent)) + [len(text)]
    lines = [text[a:b].rstrip() for a, b in zip(cuts, cuts[1:])]
    return [lines[0]] + [indent + line for line in lines[1:]]


class Prose:
    """Text laid out as rich lays it out, but never breaking a line between a number and
    its unit (``16.0`` / ``MiB``) nor leaving a value alone on a line; an indented line's
    later lines are indented two more."""

    def __init__(self, text: Text):
        self.text = text

    def __rich_console__(self, console, options):
        width = options.max_width
        parts = []
        for line in self.text.split("\n", allow_blank=True):
            hang = _hang(line.plain)
            for k, part in enumerate(line.divide(_breaks(line.plain, width, hang))):
                if k:
                    part = Text(" " * hang).append_text(part)
                part.rstrip_end(width)
                parts.append(part)
        out = Text("\n").join(parts)
        out.no_wrap, out.end = True, self.text.end
        yield out

    def __rich_measure__(self, console, options):
        return Measurement.get(console, options, self.text)


def fit_prose(view):
    """``view`` with its text (at the top, or in groups) laid out as :class:`Prose`."""
    from rich.console import Group

    if isinstance(view, Text):
        return Prose(view)
    if isinstance(view, Group):
        view.renderables[:] = [fit_prose(r) for r in view.renderables]
    return view


def _pack(words: list[str], width: int) -> list[str]:
    """``words`` (each kept whole) in lines of at most ``width`` where they fit.

    >>> _pack(["continued below, to fit:", "bytes,", "pred busbw GB/s"], 30)
    ['continued below, to fit:', 'bytes, pred busbw GB/s']
    """
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines
