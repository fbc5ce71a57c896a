"""Parsers: a registry of trace formats, detection by content, and :func:`load`.

A parser is a module with ``looks_like(lines) -> bool`` and
``parse_with(path, lines, options) -> Trace``; adding a format is adding a module and one
entry in :data:`PARSERS`, never an edit of the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from .._gc import gc_paused
from ..errors import TraceCliError, TraceFormatError, UnknownFormatError
from ..model import Trace
from . import chainer, tf_schedule
from ._text import read_bytes, read_lines
from .sizes import find_sidecar, load_sizes

__all__ = ["LoadOptions", "Parser", "PARSERS", "FORMATS", "detect_format", "load"]


Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class LoadOptions:
    """How to read a trace: force a ``format``; a ``sizes`` sidecar for op lists;
    ``progress(stage, done, total)`` called as records are parsed (for a progress bar)."""

    format: Optional[str] = None
    sizes: Optional[str] = None
    progress: Optional[Progress] = field(default=None, compare=False)


@dataclass(frozen=True)
class Parser:
    name: str
    description: str
    looks_like: Callable[[Sequence[str]], bool]
    parse: Callable[[str, list[str], LoadOptions], Trace]


def _parse_chainer(path: str, lines: list[str], options: LoadOptions) -> Trace:
    if options.sizes:
        raise TraceCliError(path, None, "--sizes applies to TensorFlow op lists only; a "
                            "Chainer dump carries its own sizes")
    return chainer.parse(path, lines, options.progress)


def _parse_tf(path: str, lines: list[str], options: LoadOptions) -> Trace:
    sizes_path = options.sizes or find_sidecar(path)
    variables = load_sizes(sizes_path) if sizes_path else None
    return tf_schedule.parse(path, lines, variables, str(sizes_path) if sizes_path else None,
                             options.progress)


PARSERS: dict[str, Parser] = {
    "chainer": Parser("chainer", "Chainer forward/backward graph dump", chainer.looks_like,
                      _parse_chainer),
    "tf-schedule": Parser("tf-schedule", "TensorFlow/Horovod executed op list",
                          tf_schedule.looks_like, _parse_tf),
}
FORMATS = tuple(PARSERS)


def detect_format(path: str, lines: Sequence[str]) -> str:
    """The registered format whose ``looks_like`` accepts ``lines``."""
    for name, parser in PARSERS.items():
        if parser.looks_like(lines):
            return name
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    hint = ""
    if lines and lines[first].lstrip().startswith(("{", "[")):
        hint = " (JSON traces such as PyTorch profiler/Kineto files are not supported yet)"
    raise UnknownFormatError(
        path, first + 1, f"cannot tell the trace format{hint}; pass --format with one of "
        + ", ".join(FORMATS),
    )


def load(path: str | Path, options: Optional[LoadOptions] = None) -> Trace:
    """Read a trace file into a :class:`~tracecli.model.Trace`.

    >>> trace = load("sample_traces/vgg19_chainer.txt")
    >>> trace.format, len(trace.parameters())
    ('chainer', 38)
    """
    options = options or LoadOptions()
    path = str(path)
    data = read_bytes(path)
    if not data.strip():
        raise TraceFormatError(path, 1, "file is empty; pass a Chainer dump or a TensorFlow "
                               "op list")
    lines = read_lines(path, data)
    if options.format is not None and options.format not in PARSERS:
        raise UnknownFormatError(path, None, f"unknown format {options.format!r}; use one of "
                                 + ", ".join(FORMATS))
    name = options.format or detect_format(path, lines)
    with gc_paused():
        try:
            return PARSERS[name].parse(path, lines, options)
        except RecursionError:
            raise TraceFormatError(path, None, "input is nested too deeply to read") from None
