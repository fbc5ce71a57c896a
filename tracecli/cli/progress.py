"""Progress on stderr wherever a person waits (issue 26 item 2).

The library reports ``progress(stage, done, total)`` as it works (parsing, starting ranks,
calibrating, replaying, reading a run's rank traces); this module shows it:

- stderr a terminal (whatever stdout is): a rich progress bar, one line a phase, gone when
  the work ends;
- otherwise (a log, a pipe, CI): once the work has run :data:`AFTER_S` seconds, one line a
  phase, ``tracecli: [12 s] replaying 45 iterations``: the phase under way at that moment,
  then each later one as it begins. Work that ends sooner prints nothing.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from typing import Callable, Optional

import click

__all__ = ["progress_bar", "PhaseLines", "describe", "AFTER_S", "PHASE_LINE"]

AFTER_S = 5.0  # work shorter than this prints no phase lines
PHASE_LINE = re.compile(r"^tracecli: \[\d+ s\] \S")  # a phase line, as tests tell it apart


def describe(stage: str, total: int) -> str:
    """What a phase is called on screen: the library's stage names made a phrase.

    >>> describe("replay", 45), describe("calibrate", 6), describe("starting 4 ranks", 4)
    ('replaying 45 iterations', 'calibrating', 'starting 4 ranks')
    """
    if stage == "replay":
        return f"replaying {total:,} iterations"
    if stage == "calibrate":
        return "calibrating"
    if stage == "parse":
        return f"parsing {total:,} records" if total else "parsing"
    if stage == "read events":
        return "reading events"
    return stage


class PhaseLines:
    """Progress without a terminal: one ``say`` line a phase, once the work has run
    ``after_s`` seconds (see the module's docstring). :meth:`close` when the work ends."""

    def __init__(self, say: Callable[[str], None], after_s: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic):
        after_s = AFTER_S if after_s is None else after_s
        self.say, self.clock = say, clock
        self.started = clock()
        self.stage: Optional[str] = None
        self.phase: Optional[str] = None
        self.late, self.closed = after_s <= 0, False
        self.lock = threading.Lock()
        self.timer = threading.Timer(max(0.0, after_s), self._late)
        self.timer.daemon = True
        if not self.late:
            self.timer.start()

    def _line(self) -> None:
        self.say(f"tracecli: [{self.clock() - self.started:.0f} s] {self.phase}")

    def _late(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.late = True
            if self.phase is not None:
                self._line()

    def __call__(self, stage: str, done: int, total: int) -> None:
        with self.lock:
            if stage == self.stage:
                return
            self.stage, self.phase = stage, describe(stage, total)
            if self.late:
                self._line()

    def close(self) -> None:
        self.timer.cancel()
        with self.lock:
            self.closed = True  # a timer already firing says nothing more


def _echo(line: str) -> None:
    click.echo(line, err=True)


@contextlib.contextmanager
def progress_bar(enabled: bool):
    """A ``progress(stage, done, total)`` callback showing the work on stderr: a bar where
    stderr is a terminal, :class:`PhaseLines` otherwise; ``None`` where not ``enabled``."""
    if not enabled:
        yield None
        return
    from rich.console import Console

    err = Console(stderr=True)
    if not err.is_terminal:
        lines = PhaseLines(_echo)
        try:
            yield lines
        finally:
            lines.close()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(describe(stage, total), total=total or None)
            bar.update(tasks[stage], completed=done, total=total or None)

        yield update
