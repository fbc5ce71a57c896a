"""A whole run: every rank's profiler trace together (see :func:`analyze_run`).

``discover`` finds the rank traces, ``load`` reads them in parallel processes keeping only
steps, collectives and each step's ops, ``match`` lines up the same collective on the ranks
of its group (``groups`` infers gloo's groups, ``align`` resynchronises where ranks
disagree), and ``analyze`` separates wait from transfer (``times``), estimates clock offsets
(``offsets``), finds stragglers against a noise model (``noise``) and why they were late
(``cause``). ``diff`` compares two runs.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .analyze import RunReport, analyze
from .discover import MAX_DIR_ENTRIES, MAX_RUN_FILES, discover, is_run
from .load import Run, read_run, workers
from .match import match

__all__ = ["analyze_run", "RunReport", "Run", "read_run", "is_run", "discover", "match",
           "analyze", "workers", "MAX_RUN_FILES", "MAX_DIR_ENTRIES"]


def analyze_run(paths: Sequence[str], processes: Optional[int] = None,
                progress=None) -> RunReport:
    """Read the run in ``paths`` (a directory, or several rank traces) and analyse it;
    ``progress`` as :func:`~.load.read_run` takes it."""
    run = read_run(paths, processes, progress)
    return analyze(run, match(run))
