"""The command line: parse options, call the library, hand results to ``render``.

Every :class:`~tracecli.errors.TraceCliError` becomes one line on stderr and exit status 2,
in one place (:class:`_Group`); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Optional

import click
from rich.console import Console

from . import __version__
from .analysis import readiness, size_report
from .errors import TraceCliError
from .parsers import FORMATS, LoadOptions, load
from .render import jsonout, tables

__all__ = ["cli"]


class _Group(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TraceCliError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.secho(f"tracecli: {exc}" if not exc.path else str(exc), fg="red", err=True)
            ctx.exit(2)


def console() -> Console:
    """stdout console: colour and width only on a terminal, plain text otherwise."""
    return Console(highlight=False, soft_wrap=False)


def write_output(path: str, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` (``-`` is stdout), refusing to overwrite without --force."""
    if path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path)
    if target.exists() and not force:
        raise TraceCliError(path, None, "exists; pass --force to overwrite it")
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TraceCliError(path, None, f"cannot write: {exc.strerror}") from None


trace_argument = click.argument("trace", metavar="TRACE")


def load_options(func):
    func = click.option("--sizes", "sizes", metavar="FILE",
                        help="Sizes sidecar for a TensorFlow op list (default: TRACE.sizes.json "
                        "beside the trace).")(func)
    func = click.option("--format", "fmt", type=click.Choice(FORMATS),
                        help="Trace format (default: detected from the content).")(func)
    return func


def _load(trace: str, fmt: Optional[str], sizes: Optional[str]):
    return load(trace, LoadOptions(format=fmt, sizes=sizes))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracecli")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Gradient readiness, all-reduce bucket plans and their replay, from one step's trace."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@cli.command()
@trace_argument
@load_options
@click.option("--top", type=click.IntRange(min=1), help="Show only the first N rows of tables.")
@click.option("--per-gradient", is_flag=True, help="One readiness row per gradient, not per layer.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document (DESIGN 5).")
def inspect(trace, fmt, sizes, top, per_gradient, as_json):
    """What is in a step: ops, tensors, parameters, readiness order, sizes."""
    t = _load(trace, fmt, sizes)
    ready = readiness(t)
    report = size_report(t, ready)
    if as_json:
        click.echo(jsonout.dumps(jsonout.inspect_doc(t, ready, report)), nl=False)
        return
    console().print(tables.inspect_view(t, ready, report, top=top, per_gradient=per_gradient))


@cli.command()
@trace_argument
@load_options
@click.option("--to", "to", type=click.Choice(["graphml", "json"]), required=True,
              help="GraphML, or networkx node-link JSON.")
@click.option("-o", "--output", "output", required=True, metavar="FILE",
              help="Where to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
def export(trace, fmt, sizes, to, output, force):
    """Write the trace graph for other tools (GraphML or node-link JSON)."""
    t = _load(trace, fmt, sizes)
    if to == "json":
        text = jsonout.dumps(t.node_link())
    else:
        buffer = io.BytesIO()
        t.write_graphml(buffer)
        text = buffer.getvalue().decode("utf-8")
    write_output(output, text, force)


def main() -> None:  # pragma: no cover - console entry point
    cli(prog_name="tracecli")
