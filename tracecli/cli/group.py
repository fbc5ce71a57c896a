"""The ``tracecli`` group, and the one place that turns errors into one line.

Every :class:`~tracecli.errors.TraceCliError` becomes one line on stderr and exit status 2
(:class:`_Group`); so does every usage error; ``--debug`` shows the traceback instead.
Ctrl-C exits 130; a bug is one line and exit status 1. A reader that closes the pipe early
(``tracecli plan-buckets ... | head -1``) ends the command quietly, as Unix tools end on
SIGPIPE (exit status 141). Outputs are claimed before the work
and written after it (:mod:`tracecli.outfile`); the session in ``.tracecli/`` fills in what
was left out (:mod:`tracecli.session`).
"""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from .._gc import gc_paused
from ..errors import TraceCliError

__all__ = ["cli"]

CLOSED_PIPE_STATUS = 128 + 13  # what a shell reports for a process ended by SIGPIPE


def _closed_pipe() -> None:
    """The reader of standard output has gone: point it at /dev/null, so that nothing more
    (not even the interpreter's last flush) tries to write to it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


class _Group(click.Group):
    """Turns errors into one line: the user's (exit 2), interrupts (130), our bugs (1)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            if not standalone_mode:
                return status
            sys.stdout.flush()
            sys.exit(status if isinstance(status, int) else 0)
        except BrokenPipeError:
            _closed_pipe()
            sys.exit(CLOSED_PIPE_STATUS)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:  # usage errors: one line, with the valid choices
            where = f"tracecli {exc.ctx.info_name}" if getattr(exc, "ctx", None) and \
                exc.ctx.info_name != "tracecli" else "tracecli"
            message = " ".join(exc.format_message().split())
            click.secho(f"{where}: {message} (--help shows the options)", fg="red", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.secho("tracecli: interrupted", fg="red", err=True)
            sys.exit(130)

    def invoke(self, ctx: click.Context):
        def debug() -> bool:  # set by the group's callback, before any subcommand runs
            return bool(ctx.obj and ctx.obj.get("debug"))

        try:
            with gc_paused():  # a short-lived process that builds no cycles: no collector passes
                return super().invoke(ctx)
        except TraceCliError as exc:
            if debug():
                raise
            click.secho(f"tracecli: {exc}" if not exc.path else str(exc), fg="red", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.secho("tracecli: interrupted", fg="red", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            if debug():
                raise
            _closed_pipe()
            ctx.exit(CLOSED_PIPE_STATUS)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: one line, traceback with --debug
            if debug():
                raise
            click.secho(f"tracecli: internal error: {type(exc).__name__}: {exc}; rerun with "
                        "--debug for the traceback and please report it", fg="red", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"],
                                           "max_content_width": 100})
@click.version_option(__version__, prog_name="tracecli")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Gradient readiness, all-reduce bucket plans and their replay, from one step's trace.

    \b
    tracecli inspect trace.txt              # remembers the trace in this directory
    tracecli plan-buckets --max-bytes 32k   # plans the remembered trace
    tracecli replay --gpus 4                # replays the remembered plan on 4 ranks
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
