"""One rank of a run: the little of its profiler trace that the run analysis needs.

:func:`read_rank` runs in a worker process (see :mod:`.load`): it streams the trace with
the Kineto reader, finds the profiled steps and the collectives (where each ran: the NCCL
kernel on a GPU, gloo's worker span on the CPU) and returns a :class:`RankData` of a few
hundred small records, whatever the size of the trace. Times stay in the rank's own clock,
in microseconds from the earliest ``baseTimeNanoseconds`` of the run (see :func:`shifted`).
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple, Optional

from ..errors import TraceFormatError
from ..limits import MAX_RANKS
from ..inputfile import open_input
from ..parsers.kineto_collectives import launches, pair_runs, purpose
from ..parsers.kineto_events import read_events
from ..parsers.kineto_threads import Thread, backward_window, find_steps

__all__ = ["RankStep", "RankCollective", "RankData", "read_rank", "rank_from_name",
           "MAX_TRACE_BYTES", "shifted"]

MAX_TRACE_BYTES = 16 << 30  # the streaming reader's own bound (decompressed)
_NAME_RANK = re.compile(r"(?:^|[^a-z0-9])(?:rank|worker)[-_]?(\d{1,7})(?![0-9])", re.I)


class RankStep(NamedTuple):
    index: Optional[int]  # K of ProfilerStep#K
    label: str
    ts: float  # us, the rank's clock
    end: float
    backward: Optional[tuple[float, float]]  # the backward pass's span, if any


class RankCollective(NamedTuple):
    """One collective as one rank saw it; times in us on the rank's clock."""

    step: Optional[int]
    kind: str
    purpose: str
    elements: Optional[int]
    dtype: Optional[str]
    group: Optional[str]  # Process Group Name, when recorded
    seq: Optional[int]  # the process group's sequence number, when recorded
    launch: float
    start: Optional[float]  # where it ran: None when the trace lost its execution
    end: Optional[float]
    device: Optional[str]  # "gpu" (a kernel) or "cpu" (gloo's span)
    line: int


class RankData(NamedTuple):
    path: str
    rank: int
    rank_from: str  # "distributedInfo" or "file name"
    world_size: Optional[int]
    backend: Optional[str]
    groups: Optional[int]  # distributedInfo.pg_count
    groups_span_all: bool  # distributedInfo.pg_config lists every group, each of every rank
    base_us: int  # baseTimeNanoseconds // 1000 (0 when absent)
    steps: tuple[RankStep, ...]
    collectives: tuple[RankCollective, ...]
    events: int


def rank_from_name(path: str) -> Optional[int]:
    """The rank a file name states (``rank-3``, ``rank3``, ``worker_3``), else ``None``.

    >>> rank_from_name("run/rank-3.json.gz"), rank_from_name("worker12.pt.trace.json")
    (3, 12)
    >>> rank_from_name("host_1234.1700000000.pt.trace.json") is None
    True
    """
    found = _NAME_RANK.findall(Path(path).name)
    return int(found[-1]) if len(found) == 1 else None


def _int(info: dict, key: str, high: int) -> Optional[int]:
    v = info.get(key)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= high:
        return v
    return None


def _world(path: str, top: dict) -> tuple[Optional[int], Optional[int], Optional[str], Optional[int]]:
    info = top.get("distributedInfo")
    if info is None:
        return None, None, None, None
    if not isinstance(info, dict):
        raise TraceFormatError("\"distributedInfo\" must be an object", path=path, line=1)
    for key in ("rank", "world_size", "pg_count"):
        if key in info and _int(info, key, MAX_RANKS) is None:
            raise TraceFormatError(f"distributedInfo.{key} must be an integer in "
                                   f"[0, {MAX_RANKS}], not {str(info[key])[:40]!r}", path=path, line=1)
    backend = info.get("backend")
    return (_int(info, "rank", MAX_RANKS), _int(info, "world_size", MAX_RANKS),
            backend[:40] if isinstance(backend, str) else None, _int(info, "pg_count", MAX_RANKS))


def _span_all(top: dict, world: Optional[int], groups: Optional[int]) -> bool:
    info = top.get("distributedInfo")
    config = info.get("pg_config") if isinstance(info, dict) else None
    if not isinstance(config, list) or world is None or len(config) != (groups or 1):
        return False
    return all(isinstance(g, dict) and g.get("pg_size") == world for g in config)


def _base_us(path: str, top: dict) -> int:
    base = top.get("baseTimeNanoseconds", 0)
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base < 1 << 63:
        raise TraceFormatError("\"baseTimeNanoseconds\" must be a non-negative "
                               "integer", path=path, line=1)
    return base // 1000


def _group(args: dict) -> tuple[Optional[str], Optional[int]]:
    name = args.get("Process Group Name")
    seq = args.get("Seq")
    return (name if isinstance(name, str) and len(name) <= 256 else None,
            seq if isinstance(seq, int) and not isinstance(seq, bool) else None)


def read_rank(path: str) -> RankData:
    """The steps and collectives of one rank's trace (runs in a worker process)."""
    source = open_input(path, TraceFormatError, "trace", MAX_TRACE_BYTES)
    with source.stream() as stream:
        ev = read_events(stream, path)
    rank, world, backend, groups = _world(path, ev.top)
    rank_from = "distributedInfo"
    if rank is None:
        rank, rank_from = rank_from_name(path), "file name"
        if rank is None:
            raise TraceFormatError("which rank is this? the trace has no "
                                   "distributedInfo.rank and its name states none; name the "
                                   "file rank-N.json.gz (N: its rank)", path=path, line=1)
    by_tid: dict[Any, list] = defaultdict(list)
    for e in ev.host:
        by_tid[e.tid].append(e)
    threads = {tid: Thread(events) for tid, events in by_tid.items()}
    found = find_steps(path, threads)
    steps = tuple(RankStep(s.index, s.label, s.ts, s.end, backward_window(threads, s))
                  for s in found)
    issued = launches(threads)
    pair_runs(issued, ev, threads)
    starts = [s.ts for s in found]
    out = []
    for l in issued:
        k = bisect.bisect_right(starts, l.event.ts) - 1
        if k < 0 or l.event.ts >= found[k].end:
            continue  # outside every profiled step (DDP's construction-time broadcast)
        group, seq = _group(l.event.args or {})
        run = l.run
        if run is not None and (group is None or seq is None):
            g2, s2 = _group(run.args or {})
            group, seq = group or g2, seq if seq is not None else s2
        out.append(RankCollective(
            found[k].index, l.kind.value, purpose(l, steps[k].backward).value, l.elements, l.dtype,
            group, seq, l.event.ts, run.ts if run else None, run.end if run else None,
            None if run is None else ("gpu" if run.cat == "kernel" else "cpu"), l.event.line))
    return RankData(path, rank, rank_from, world, backend, groups,
                    _span_all(ev.top, world, groups), _base_us(path, ev.top),
                    steps, tuple(out), ev.events)


def shifted(data: RankData, base_us: int) -> float:
    """What to add to ``data``'s times to count them from the run's ``base_us``."""
    return float(data.base_us - base_us)
