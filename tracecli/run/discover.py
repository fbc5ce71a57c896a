"""Which files make a run: a directory of per-rank profiler traces, or several files.

Bounded before anything is parsed: a directory is listed up to :data:`MAX_DIR_ENTRIES`
entries (not recursively: subdirectories and their symbolic links are never followed), and
a run has at most :data:`MAX_RUN_FILES` rank traces. In a directory, the ``.json`` and
``.json.gz`` files whose first 64 KiB look like a profiler trace (``"traceEvents"``,
``"schemaVersion"`` or ``"distributedInfo"``) are the ranks; other JSON files there (a
parameter sidecar, notes) are skipped and said. Files named explicitly are never skipped.
"""

from __future__ import annotations

import os
import re
import stat
from typing import NamedTuple, Sequence

from ..errors import TraceFormatError
from ..inputfile import open_input

__all__ = ["Discovered", "discover", "is_run", "MAX_RUN_FILES", "MAX_DIR_ENTRIES"]

MAX_RUN_FILES = 1024  # ranks in one run
MAX_DIR_ENTRIES = 4 * MAX_RUN_FILES  # entries listed in a run's directory
SUFFIXES = (".json", ".json.gz")
_MARKERS = (b'"traceEvents"', b'"schemaVersion"', b'"distributedInfo"')


class Discovered(NamedTuple):
    files: tuple[str, ...]
    skipped: tuple[str, ...]  # JSON files of the directory that are not profiler traces
    given: str  # how to name the run in messages


def is_run(paths: Sequence[str]) -> bool:
    """Several paths, or one directory: a run rather than one trace."""
    return len(paths) > 1 or (len(paths) == 1 and paths[0] != "-" and os.path.isdir(paths[0]))


def _natural(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _stat(path: str):
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise TraceFormatError("no such file", path=path) from None
    except OSError as exc:
        raise TraceFormatError(f"cannot read: {exc.strerror}", path=path) from None


def _looks_like_trace(path: str) -> bool:
    head = open_input(path, TraceFormatError, "trace", 1 << 34).head()
    return head.lstrip()[:1] == b"{" and any(m in head for m in _MARKERS)


def _listing(directory: str) -> list[str]:
    names = []
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries, 1):
                if count > MAX_DIR_ENTRIES:
                    raise TraceFormatError(f"holds more than "
                                           f"{MAX_DIR_ENTRIES:,} entries; a run is at most "
                                           f"{MAX_RUN_FILES:,} rank traces: pass the directory "
                                           "that holds only one run's traces", path=directory)
                if entry.name.endswith(SUFFIXES):
                    names.append(entry.name)
    except OSError as exc:
        raise TraceFormatError(f"cannot list: {exc.strerror}", path=directory) from None
    return sorted(names, key=_natural)


def discover(paths: Sequence[str]) -> Discovered:
    """The rank trace files of a run given as one directory or several files (or one file:
    a run of the one rank it holds)."""
    if len(paths) == 1 and paths[0] != "-" and stat.S_ISREG(_stat(paths[0]).st_mode):
        return Discovered((paths[0],), (), paths[0])
    if len(paths) == 1:
        directory = paths[0]
        _stat(directory)
        files, skipped = [], []
        for name in _listing(directory):
            path = os.path.join(directory, name)
            info = _stat(path)  # a symbolic link loop is an error here, named
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise TraceFormatError("not a regular file; a run's traces are "
                                       "files", path=path)
            (files if _looks_like_trace(path) else skipped).append(path)
            if len(files) > MAX_RUN_FILES:
                raise TraceFormatError(f"holds more than {MAX_RUN_FILES:,} "
                                       "profiler traces; tracecli reads runs of up to "
                                       f"{MAX_RUN_FILES:,} ranks", path=directory)
        if not files:
            what = f" ({len(skipped)} JSON files, none a profiler trace)" if skipped else ""
            raise TraceFormatError("holds no profiler traces" + what +
                                   "; a run is a directory of per-rank .json or .json.gz "
                                   "traces (torch.profiler's export_chrome_trace, one per rank)", path=directory)
        return Discovered(tuple(files), tuple(skipped), directory)
    if len(paths) > MAX_RUN_FILES:
        raise TraceFormatError(f"more than {MAX_RUN_FILES:,} "
                               "traces given; tracecli reads runs of up to "
                               f"{MAX_RUN_FILES:,} ranks", path=paths[MAX_RUN_FILES])
    seen: dict[tuple, str] = {}
    for path in paths:
        if path == "-":
            raise TraceFormatError("standard input cannot be one rank of a run; "
                                   "pass the rank files", path=path)
        info = _stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise TraceFormatError("is a directory; pass one directory of a run's "
                                   "traces, or several trace files", path=path)
        if not stat.S_ISREG(info.st_mode):
            raise TraceFormatError("not a regular file; a run's traces are files", path=path)
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise TraceFormatError(f"is the same file as {seen[key]}; pass each "
                                   "rank's trace once", path=path)
        seen[key] = path
    return Discovered(tuple(paths), (), f"{paths[0]} and {len(paths) - 1} more")
