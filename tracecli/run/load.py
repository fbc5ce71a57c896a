"""Reading a run: each rank's trace in a worker process, then checks that they are one run.

Ranks are parsed in parallel, at most :func:`workers` at a time, and each worker returns
only its rank's steps and collectives (:class:`~.extract.RankData`), so the memory the run
takes grows with the number of collectives, not with the size of the traces. The first
rank (in file order) whose trace is bad stops the run with that file's error.

Checks, each one line naming the file: two files claiming one rank, ranks that disagree on
the world size or the backend, a rank at or past the world size, a rank whose profiled
steps differ from the lowest rank's, a rank whose steps start minutes away from the others'
(another run).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import NamedTuple, Optional, Sequence

from ..errors import TraceCliError, TraceFormatError
from .discover import Discovered, discover
from .extract import RankData, read_rank

__all__ = ["Run", "read_run", "workers", "MAX_WORKERS", "OTHER_RUN_S"]

MAX_WORKERS = 32
OTHER_RUN_S = 600.0  # steps of one run start within this of each other on every clock


class Run(NamedTuple):
    given: str
    ranks: tuple[RankData, ...]  # by rank
    base_us: int  # the earliest baseTimeNanoseconds // 1000
    skipped: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def world_size(self) -> Optional[int]:
        return self.ranks[0].world_size


def workers(files: int) -> int:
    """How many processes read a run of ``files`` traces: one per core, at most
    :data:`MAX_WORKERS`, never more than there are files."""
    return max(1, min(os.cpu_count() or 1, files, MAX_WORKERS))


def _read(path: str):
    """A worker's answer: the rank, or the error as plain values (exceptions with extra
    constructor arguments do not cross a process boundary intact)."""
    try:
        return read_rank(path)
    except TraceCliError as exc:
        return ("error", type(exc).__name__, exc.path, exc.line, exc.message)
    except RecursionError:
        return ("error", "TraceFormatError", path, None, "input is nested too deeply to read")


def _raise(answer) -> None:
    _, _, path, line, message = answer
    raise TraceFormatError(message, path=path, line=line)


def _read_all(files: Sequence[str], processes: int, progress=None) -> list[RankData]:
    stage = f"reading {len(files)} rank traces"
    if progress:
        progress(stage, 0, len(files))
    if processes <= 1:
        answers = map(_read, files)
        out = []
        for a in answers:
            if isinstance(a, tuple) and a and a[0] == "error":
                _raise(a)
            out.append(a)
            if progress:
                progress(stage, len(out), len(files))
        return out
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = ProcessPoolExecutor(max_workers=processes, mp_context=context)
    try:
        out = []
        for a in pool.map(_read, files):
            if isinstance(a, tuple) and a and a[0] == "error":
                _raise(a)
            out.append(a)
            if progress:
                progress(stage, len(out), len(files))
        return out
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _check(ranks: list[RankData]) -> list[str]:
    notes = []
    by_rank: dict[int, RankData] = {}
    for r in ranks:
        if r.rank in by_rank:
            raise TraceFormatError(f"claims rank {r.rank}, as does "
                                   f"{by_rank[r.rank].path}; pass each rank's trace once", path=r.path, line=1)
        by_rank[r.rank] = r
    ranks.sort(key=lambda r: r.rank)
    first = ranks[0]
    for r in ranks[1:]:
        if r.world_size != first.world_size:
            raise TraceFormatError(f"world size {r.world_size}, but "
                                   f"{first.path} (rank {first.rank}) says {first.world_size}: "
                                   "not one run; pass the traces of one run", path=r.path, line=1)
        if r.backend != first.backend:
            raise TraceFormatError(f"backend {r.backend}, but {first.path} says "
                                   f"{first.backend}: not one run", path=r.path, line=1)
    world = first.world_size
    for r in ranks:
        if world is not None and r.rank >= world:
            raise TraceFormatError(f"rank {r.rank} of a world of {world}: "
                                   "the rank or the world size is wrong", path=r.path, line=1)
    labels = [s.label for s in first.steps]
    for r in ranks[1:]:
        mine = [s.label for s in r.steps]
        if mine != labels:
            lack = [x for x in labels if x not in mine]
            extra = [x for x in mine if x not in labels]
            what = (f"has no {lack[0]}" if lack else f"has {extra[0]}") + \
                f", which {first.path} (rank {first.rank}) " + ("holds" if lack else "lacks")
            raise TraceFormatError(what + "; profile the same steps on every "
                                   "rank (one schedule in every process)", path=r.path)
    return notes


def _other_run(ranks: list[RankData], base_us: int) -> None:
    first = ranks[0]
    if not first.steps:
        return
    t0 = first.steps[0].ts + (first.base_us - base_us)
    for r in ranks[1:]:
        t = r.steps[0].ts + (r.base_us - base_us)
        if abs(t - t0) > OTHER_RUN_S * 1e6:
            raise TraceFormatError(f"its {r.steps[0].label} starts "
                                   f"{abs(t - t0) / 1e6:,.0f} s away from {first.path}'s: "
                                   "a trace of another run? pass the traces of one run", path=r.path)


def read_run(paths: Sequence[str], processes: Optional[int] = None, progress=None) -> Run:
    """The run in ``paths`` (one directory, or several files), read and checked;
    ``progress(stage, done, total)`` is called as each rank's trace is read."""
    found: Discovered = discover(paths)
    n = workers(len(found.files)) if processes is None else max(1, processes)
    ranks = _read_all(found.files, min(n, len(found.files)), progress)
    base_us = min(r.base_us for r in ranks)
    ranks.sort(key=lambda r: r.rank)
    _other_run(ranks, base_us)  # first: another run's rank also differs in its steps
    notes = _check(ranks)
    if found.skipped:
        names = ", ".join(os.path.basename(p) for p in found.skipped[:4])
        notes.append(f"skipped {len(found.skipped)} JSON file(s) that are not profiler traces: "
                     f"{names}{', ...' if len(found.skipped) > 4 else ''}")
    return Run(found.given, tuple(ranks), base_us, found.skipped, tuple(notes))
