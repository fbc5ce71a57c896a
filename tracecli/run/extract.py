"""One rank of a run: the little of its profiler trace that the run analysis needs.

:func:`read_rank` runs in a worker process (see :mod:`.load`): it streams the trace with
the Kineto reader, finds the profiled steps on their clock (the device's, on a GPU trace:
see :mod:`tracecli.parsers.kineto_device`), the collectives as the model records them
(:class:`~tracecli.model.Collective`, ms from their step's start) and each step's ops
(:mod:`.stepops`), and returns a :class:`RankData` of small records, whatever the size of
the trace. Steps' times stay in the rank's own clock, in microseconds from the earliest
``baseTimeNanoseconds`` of the run (see :func:`shifted`); a collective's absolute time is
its step's start plus its ms (:func:`at_us`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple, Optional

from ..errors import TraceFormatError
from ..limits import MAX_RANKS
from ..inputfile import open_input
from ..model import Collective
from ..parsers.kineto_collectives import collectives, launches, pair_runs
from ..parsers.kineto_device import DeviceClock, step_clock
from ..parsers.kineto_events import read_events
from ..parsers.kineto_threads import Thread, backward_window, find_steps
from .stepops import StepOps, step_ops

__all__ = ["RankStep", "RankData", "read_rank", "rank_from_name", "MAX_TRACE_BYTES",
           "shifted", "at_us"]

MAX_TRACE_BYTES = 16 << 30  # the streaming reader's own bound (decompressed)
_NAME_RANK = re.compile(r"(?:^|[^a-z0-9])(?:rank|worker)[-_]?(\d{1,7})(?![0-9])", re.I)


class RankStep(NamedTuple):
    index: Optional[int]  # K of ProfilerStep#K
    label: str
    ts: float  # us, the rank's clock: the step's start (the device's on a GPU trace)
    end: float
    backward: Optional[tuple[float, float]]  # the backward pass's span, same clock
    device: bool  # timed on the device
    ops: Optional[StepOps] = None


class RankData(NamedTuple):
    path: str
    rank: int
    rank_from: str  # "distributedInfo" or "file name"
    world_size: Optional[int]
    backend: Optional[str]
    groups: Optional[int]  # distributedInfo.pg_count
    group_ranks: tuple[tuple[str, tuple[int, ...]], ...]  # pg_config: each group's name, ranks
    base_us: int  # baseTimeNanoseconds // 1000 (0 when absent)
    steps: tuple[RankStep, ...]
    collectives: tuple[Collective, ...]  # ms from their step's start
    events: int

    @property
    def groups_span_all(self) -> bool:
        """``pg_config`` lists every group of the process, each holding every rank."""
        world = self.world_size
        return bool(self.group_ranks) and world is not None and \
            len(self.group_ranks) == (self.groups or 1) and \
            all(len(r) == world for _, r in self.group_ranks)

    def step_of(self, index: Optional[int]) -> Optional[RankStep]:
        for s in self.steps:
            if s.index == index:
                return s
        return None


def at_us(step: RankStep, ms: float) -> float:
    """A time of ``step`` (ms from its start) on the rank's clock, us."""
    return step.ts + ms * 1000.0


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


MAX_GROUP_RANKS = 1 << 20  # groups in pg_config, ranks in a group, a rank's number


def _group_ranks(path: str, top: dict) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``distributedInfo.pg_config``: each group's name and ranks (what is malformed is
    left out: a group without a readable name or rank list says nothing)."""
    info = top.get("distributedInfo")
    config = info.get("pg_config") if isinstance(info, dict) else None
    if not isinstance(config, list):
        return ()
    out = []
    for g in config[:MAX_GROUP_RANKS]:
        if not isinstance(g, dict) or not isinstance(g.get("pg_name"), str):
            continue
        ranks = g.get("ranks")
        if isinstance(ranks, list) and len(ranks) <= MAX_GROUP_RANKS and all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= MAX_GROUP_RANKS
                for r in ranks):
            out.append((g["pg_name"][:256], tuple(ranks)))
    return tuple(out)


def _base_us(path: str, top: dict) -> int:
    base = top.get("baseTimeNanoseconds", 0)
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base < 1 << 63:
        raise TraceFormatError("\"baseTimeNanoseconds\" must be a non-negative "
                               "integer", path=path, line=1)
    return base // 1000


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
    device = DeviceClock(ev)
    clocks = [step_clock(device, s.label, s.ts, s.end) for s in found]
    issued = launches(threads)
    pair_runs(issued, ev, threads)
    ran = collectives(issued, found, threads, clocks)
    per_step: dict = defaultdict(list)
    for c in ran:
        per_step[c.step].append(c)
    steps, seen = [], {}
    for s, clock in zip(found, clocks):
        window = backward_window(threads, s)
        backward = None if window is None else tuple(clock.origin + 1000.0 * clock.ms(t) for t in window)
        ops = step_ops(threads, s, clock, window, per_step.get(s.index, ()), seen)
        steps.append(RankStep(s.index, s.label, clock.origin, clock.end, backward,
                              clock.on_device, ops))
    return RankData(path, rank, rank_from, world, backend, groups, _group_ranks(path, ev.top),
                    _base_us(path, ev.top), tuple(steps), tuple(ran), ev.events)


def shifted(data: RankData, base_us: int) -> float:
    """What to add to ``data``'s times to count them from the run's ``base_us``."""
    return float(data.base_us - base_us)
