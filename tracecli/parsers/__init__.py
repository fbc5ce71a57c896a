"""Parsers: a registry of trace formats, detection by content, and :func:`load`.

A parser is a :class:`Parser`: ``looks_like(content) -> bool`` and
``parse(path, content, options) -> Trace``; adding a format is adding a module and one
entry in :data:`PARSERS`, never an edit of the others. :class:`Content` reads the file
once, bounded (gzip recognised by its magic bytes, ``-`` for standard input), and gives
each parser what it needs: the first bytes, the whole text as lines, or a stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Optional

from .._gc import gc_paused
from ..errors import TraceCliError, TraceFormatError, UnknownFormatError
from ..inputfile import open_input
from ..model import Trace
from . import chainer, kineto, params, tf_schedule
from ._text import MAX_LINE_CHARS, decode_text, split_lines
from .kineto_events import read_events
from .sizes import find_sidecar, load_sizes

__all__ = ["LoadOptions", "Parser", "Content", "PARSERS", "FORMATS", "detect_format", "load",
           "MAX_TEXT_BYTES"]

MAX_TEXT_BYTES = 1 << 30  # text traces are read whole; profiler traces are streamed

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class LoadOptions:
    """How to read a trace: force a ``format``; a ``sizes`` sidecar (op lists: shapes;
    profiler traces: parameter names); the profiled ``step`` to use (``ProfilerStep#K``);
    ``progress(stage, done, total)`` called as records are parsed (for a progress bar)."""

    format: Optional[str] = None
    sizes: Optional[str] = None
    step: Optional[int] = None
    progress: Optional[Progress] = field(default=None, compare=False)


class Content:
    """A trace file's content, read on demand and at most once into memory."""

    def __init__(self, path: str):
        self.path = path
        self.input = open_input(path, TraceFormatError, "trace", MAX_TEXT_BYTES,
                                max_line=4 * MAX_LINE_CHARS)
        self._head: Optional[str] = None
        self._text: Optional[str] = None
        self._lines: Optional[list[str]] = None
        self.names_checked = False  # every non-blank line is an op-list node name

    @property
    def head(self) -> str:
        """The first 64 KiB, decoded leniently (for detection only)."""
        if self._head is None:
            self._head = self.input.head().decode("utf-8", errors="replace")
        return self._head

    @property
    def text(self) -> str:
        """The whole text; binary data and bad UTF-8 are errors."""
        if self._text is None:
            self._text = decode_text(self.path, self.input.read(max_line=4 * MAX_LINE_CHARS))
        return self._text

    def lines(self) -> list[str]:
        """The whole text as lines; a huge line is an error."""
        if self._lines is None:
            self._lines = split_lines(self.path, self.text)
        return self._lines

    def stream(self) -> BinaryIO:
        return self.input.stream()


@dataclass(frozen=True)
class Parser:
    name: str
    description: str
    looks_like: Callable[[Content], bool]
    parse: Callable[[str, Content, LoadOptions], Trace]


def _no_step(path: str, options: LoadOptions) -> None:
    if options.step is not None:
        raise TraceCliError("--step picks a ProfilerStep of a PyTorch profiler "
                            "trace; this trace holds one step", path=path)


def _parse_chainer(path: str, content: Content, options: LoadOptions) -> Trace:
    if options.sizes:
        raise TraceCliError("--sizes applies to TensorFlow op lists and profiler "
                            "traces; a Chainer dump carries its own sizes", path=path)
    _no_step(path, options)
    return chainer.parse(path, content.lines(), options.progress)


def _sidecar(path: str, options: LoadOptions):
    sizes_path = options.sizes or (find_sidecar(path) if path != "-" else None)
    return (load_sizes(sizes_path) if sizes_path else None), (str(sizes_path) if sizes_path else None)


def _parse_tf(path: str, content: Content, options: LoadOptions) -> Trace:
    _no_step(path, options)
    lines = content.lines()
    variables, sizes_path = _sidecar(path, options)
    return tf_schedule.parse(path, lines, variables, sizes_path, options.progress,
                             checked=content.names_checked)


def _looks_like_tf(content: Content) -> bool:
    content.names_checked = tf_schedule.looks_like(content.text)
    return content.names_checked


def _parse_kineto(path: str, content: Content, options: LoadOptions) -> Trace:
    variables, sizes_path = _sidecar(path, options)
    with content.stream() as stream:
        events = read_events(stream, path, options.progress)
    return kineto.build(path, events, options.step, variables, sizes_path)


def _parse_params(path: str, content: Content, options: LoadOptions) -> Trace:
    if options.sizes:
        raise TraceCliError("--sizes names a parameter sidecar; a parameter list given as the "
                            "trace is its own", path=path)
    _no_step(path, options)
    return params.parse(path, content.input.read())


PARSERS: dict[str, Parser] = {
    "kineto": Parser("kineto", "PyTorch profiler trace (export_chrome_trace, .json or .json.gz)",
                     lambda c: kineto.looks_like(c.head), _parse_kineto),
    "params": Parser("params", "parameter list: a model's named_parameters() with dtypes and "
                     "marks, no trace (a model of the step)", lambda c: params.looks_like(c.head),
                     _parse_params),
    "chainer": Parser("chainer", "Chainer forward/backward graph dump",
                      lambda c: chainer.looks_like(c.head.split("\n", 1)), _parse_chainer),
    "tf-schedule": Parser("tf-schedule", "TensorFlow/Horovod executed op list",
                          _looks_like_tf, _parse_tf),
}
FORMATS = tuple(PARSERS)


def detect_format(path: str, content: Content) -> str:
    """The registered format whose ``looks_like`` accepts ``content``."""
    for name, parser in PARSERS.items():
        if parser.looks_like(content):
            return name
    lines = content.lines()
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    hint = ""
    if lines and lines[first].lstrip().startswith("["):
        hint = (" (a JSON list; profiler traces are JSON objects with \"traceEvents\", a "
                "parameter list's entries have name, shape and dtype)")
    raise UnknownFormatError(
        f"cannot tell the trace format{hint}; pass --format with one of "
        + ", ".join(FORMATS), path=path, line=first + 1,
    )


def load(path: str | Path, options: Optional[LoadOptions] = None) -> Trace:
    """Read a trace file (``-``: standard input) into a :class:`~tracecli.model.Trace`;
    ``load(path).graph`` is its networkx graph (built on first use).

    >>> trace = load("sample_traces/vgg19_chainer.txt")
    >>> trace.format, len(trace.parameters())
    ('chainer', 38)
    >>> graph = load("sample_traces/resnet50_horovod_tf.txt").graph
    >>> graph.number_of_nodes(), sorted({kind.value for _, _, kind in graph.edges(data="kind")})
    (2681, ['allreduce', 'gradient', 'handoff', 'update'])
    """
    options = options or LoadOptions()
    path = str(path)
    if options.format is not None and options.format not in PARSERS:
        raise UnknownFormatError(f"unknown format {options.format!r}; use one of "
                                 + ", ".join(FORMATS), path=path)
    content = Content(path)
    if not content.head.strip():
        raise TraceFormatError("file is empty; pass a Chainer dump, a TensorFlow op "
                               "list or a PyTorch profiler trace", path=path, line=1)
    name = options.format or detect_format(path, content)
    with gc_paused():
        try:
            return PARSERS[name].parse(path, content, options)
        except RecursionError:
            raise TraceFormatError("input is nested too deeply to read", path=path) from None
