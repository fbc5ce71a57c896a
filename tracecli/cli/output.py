"""The one output path: the output options, declared once, and :func:`emit`.

Every command hands its result (:mod:`tracecli.results`) to :func:`emit`, which prints its
JSON (``--json``) or its view (honouring ``--top``) and the lines printed whole after it,
then writes its ``--out`` file and its ``--chrome-trace`` timeline, saying what it wrote.
Notices go to stderr; JSON goes to stdout byte for byte.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, Iterable, Optional, Union

import click

from .outfile import Outputs
from ..render import jsonout

if TYPE_CHECKING:
    from rich.console import Console

    from .results import Result

__all__ = ["Output", "emit", "notice", "machine", "console", "json_option",
           "top_option", "out_option", "chrome_trace_option", "force_option"]


def console() -> Console:
    """stdout console: colour only on a terminal; 140 columns into pipes and files
    (unless COLUMNS says otherwise), the terminal's width on one. (rich, its tables and
    the views are imported where they are used: JSON output never needs them.)"""
    from rich.console import Console

    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(highlight=False, soft_wrap=False, width=140)
    return out


def machine(text: str) -> None:
    """JSON or GraphML on standard output byte for byte: click would otherwise scan tens of
    megabytes for terminal escapes to strip (JSON has none: it escapes control characters;
    any in exported data are data, not colours)."""
    click.echo(text, nl=False, color=True)


def text_width() -> Optional[int]:
    """The width prose is wrapped at on stderr: ``COLUMNS`` where set, else the terminal's
    where stderr is one; ``None`` (one line a notice, for logs and grep) otherwise."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stderr.isatty():
        return shutil.get_terminal_size().columns
    return None


def notice(text: Optional[str]) -> None:
    """``tracecli: TEXT`` on stderr, wrapped (at spaces, never between a number and its
    unit; later lines indented) at :func:`text_width`."""
    if not text:
        return
    text = f"tracecli: {text}"
    width = text_width()
    if width is not None and len(text) > width:
        from ..render.layout import wrap_plain

        text = "\n".join(wrap_plain(text, width, indent="  "))
    click.secho(text, fg="yellow", err=True)


# The output options, each declared here once; a command passes its own help or metavar.

def json_option(help: str):
    return click.option("--json", "as_json", is_flag=True, help=help)


def top_option(rows: str = "buckets", row: str = "bucket"):
    return click.option("--top", type=click.IntRange(min=1), help=f"Show the first N {rows} "
                        f"(default: 1,000; --json has every {row}).")


def out_option(metavar: str, help: str):
    return click.option("--out", metavar=metavar, help=help)


def chrome_trace_option(help: str):
    return click.option("--chrome-trace", metavar="FILE", help=help)


def force_option(files: str = "--out / --chrome-trace files"):
    return click.option("--force", is_flag=True, help=f"Replace {files} (a symlink is replaced, "
                        "not followed).")


_KEYS = ("as_json", "top", "out", "chrome_trace", "force")


class Output:
    """What a command was asked to output, and the files it claimed for it."""

    def __init__(self, as_json: bool = False, top: Optional[int] = None,
                 out: Optional[str] = None, chrome_trace: Optional[str] = None,
                 force: bool = False, out_option: str = "--out"):
        self.as_json, self.top, self.out, self.chrome_trace, self.force = \
            as_json, top, out, chrome_trace, force
        self.out_option = out_option
        self.files = Outputs(force)

    @classmethod
    def pop(cls, kw: dict, out_option: str = "--out") -> "Output":
        """The output options a command declared, taken out of its keyword arguments."""
        return cls(**{k: kw.pop(k) for k in _KEYS if k in kw}, out_option=out_option)

    def claim(self, *inputs: Optional[str]) -> None:
        """Check the output files before the work (none may be one of ``inputs``)."""
        flat = tuple(x for i in inputs for x in (i if isinstance(i, tuple) else (i,)))
        self.files = Outputs(self.force, flat)
        self.files.claim(self.out_option, self.out)
        self.files.claim("--chrome-trace", self.chrome_trace)


def write(files: Outputs, option: str, text: Union[str, Iterable[str]]) -> None:
    """Write a claimed output (text or chunks of it): ``-`` here, a file atomically, then
    say what was written."""
    if files.path(option) == "-":
        for chunk in [text] if isinstance(text, str) else text:
            machine(chunk)
        return
    notice(f"wrote {files.write(option, text)}")


def emit(result: Result, options: Output) -> None:
    """Print ``result`` as asked, then write the files it has for the claimed outputs."""
    if options.as_json:
        machine(result.json_text())
    else:
        view = result.view(options.top)
        if view is not None:
            from ..render.layout import fit_prose

            console().print(fit_prose(view))
        lines = result.lines()
        if lines is not None:  # whole lines, never cut or wrapped by a table
            click.echo("\n".join(lines))
    if options.out:
        text = result.file_text()
        if text is not None:
            write(options.files, options.out_option, text)
    if options.chrome_trace:
        trace = result.chrome_trace()
        if trace is not None:
            write(options.files, "--chrome-trace", jsonout.dumps(trace))
