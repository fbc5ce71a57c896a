"""What a command reads: TRACE as given or as the session remembers it, and the session.

The session in ``./.tracecli/`` is loaded once per command; what loading it had to say is
said at once (by rank 0 only under torchrun, where every rank runs the CLI).
"""

from __future__ import annotations

import os
from typing import Optional

import click
from click.core import ParameterSource

from ..errors import TraceCliError
from ..parsers import LoadOptions, load
from ..run import RunReport, analyze_run, is_run, read_run
from .session import Session
from .output import notice
from .progress import progress_bar

__all__ = ["load_trace", "load_run", "run_paths", "session", "silent_rank", "say_notices",
           "given", "trace_args", "remember"]

BIG_TRACE_BYTES = 8 * 1024 * 1024  # a progress bar for traces that take seconds to parse


def run_paths(trace) -> Optional[tuple[str, ...]]:
    """TRACE as a run's paths (a directory, or several files), else ``None``."""
    if trace is None:
        return None
    paths = trace if isinstance(trace, tuple) else (trace,)
    return paths if is_run(paths) else None


def _no_trace_options(fmt, sizes, step, what: str) -> None:
    for name, value in (("--format", fmt), ("--sizes", sizes), ("--step", step)):
        if value is not None:
            raise TraceCliError(f"{name} applies to one trace, not to a run; "
                                f"{what}")


def load_run(trace, fmt=None, sizes=None, step=None) -> RunReport:
    """A run's report: every rank's trace read and lined up."""
    _no_trace_options(fmt, sizes, step, "pass one rank's trace to use it")
    with progress_bar(not silent_rank()) as progress:
        return analyze_run(run_paths(trace), progress=progress)


def load_trace(trace, fmt: Optional[str], sizes: Optional[str], step: Optional[int] = None,
               quiet: bool = False):
    paths = run_paths(trace)
    if paths is not None:  # a command of one trace given a run: its lowest rank's trace
        with progress_bar(not quiet) as progress:
            run = read_run(paths, progress=progress)
        first = run.ranks[0]
        if not quiet:
            notice(f"reading rank {first.rank}'s trace ({first.path}), the lowest rank of the "
                   f"run's {len(run.ranks)}; tracecli inspect RUN shows the run as a whole")
        trace = first.path
    try:
        big = trace != "-" and os.path.getsize(trace) >= BIG_TRACE_BYTES
    except OSError:
        big = False  # load() says what is wrong with the path
    with progress_bar(big and not quiet) as progress:
        return load(trace, LoadOptions(format=fmt, sizes=sizes, step=step, progress=progress))


def session(ctx: click.Context) -> Session:
    """This directory's session, loaded once; what loading it had to say is said at once."""
    obj = ctx.find_root().obj
    if "session" not in obj:
        obj["session"] = Session.load(".")
        say_notices(obj["session"])
    return obj["session"]


def silent_rank() -> bool:
    """Under torchrun, every rank runs the CLI; rank 0 speaks for all."""
    from ..replay.processes import in_torchrun

    return in_torchrun() and os.environ.get("RANK") != "0"


def say_notices(s: Session) -> None:
    if not silent_rank():
        for text in s.notices:
            notice(text)
    s.notices.clear()


def given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT,
                                                  ParameterSource.DEFAULT_MAP, None)


def trace_args(ctx: click.Context, trace: Optional[str], fmt, sizes, step, what: str):
    """TRACE and how to read it: as given, else the session's remembered trace (explicit
    options still win), with a one-line notice saying so. The last value says which."""
    if trace is not None:
        return trace, fmt, sizes, step, False
    s = session(ctx)
    remembered = s.remembered_trace()
    say_notices(s)
    if remembered.run is not None:
        notice(f"{what} the remembered run {remembered.given} (from tracecli inspect; pass "
               "TRACE or RUN to choose another)")
        path = remembered.run if len(remembered.run) > 1 else remembered.run[0]
        return path, fmt, sizes, step, True
    notice(f"{what} the remembered trace {remembered.given} (from tracecli inspect; pass "
           "TRACE to choose another)")
    return (remembered.path, fmt or remembered.format, sizes or remembered.sizes,
            step if step is not None else remembered.step, True)


def remember(ctx: click.Context, trace, fmt, sizes, step) -> None:
    """Remember TRACE (or a run) for later commands, saying so (standard input cannot be
    read again)."""
    if trace == "-":
        return
    s = session(ctx)
    paths = run_paths(trace)
    try:
        if paths is not None:
            s.remember_run(paths)
        else:
            s.remember_trace(trace, fmt, sizes, step)
    except OSError as exc:
        notice(f"could not remember {trace}: {exc.strerror}")
        return
    notice(s.save())
