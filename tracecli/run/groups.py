"""Which process group each collective of a rank ran on, where the trace does not say.

torch records a collective's ``Process Group Name`` (>= 2.4, NCCL); gloo in torch 2.13
records none. What a gloo trace does say: each process group runs its collectives on its
own ``pt_gloo_runloop`` threads (:data:`GLOO_THREADS` a group), created with the group, so
their thread ids grow with the groups' creation order, as the groups' names do; and
``distributedInfo.pg_config`` lists the groups the rank belongs to, with their ranks.

So a rank's threads, in id order, go to its groups in name order, each group taking at most
:data:`GLOO_THREADS` threads, and a group may have run nothing (Kineto names only threads
with events: a group whose work all ran on the Python thread, send and recv, shows none).
Of those assignments, the one to keep is the one the other ranks agree with: every member of
a group sees the same collectives on it, in the same order (kind and size; an all-to-all's
size is its own). :func:`lane_groups` keeps, rank by rank, the assignments whose groups some
assignment of every other present member agrees with, until nothing changes; a rank left
with one (or several that put every collective in the same group) is resolved, any other is
not, and the caller says so.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional, Sequence

from ..model import Collective, CollectiveKind
from .extract import RankData

__all__ = ["lane_groups", "one_group", "GLOO_THREADS", "own_groups", "MAX_CANDIDATES"]

GLOO_THREADS = 2  # ProcessGroupGloo's default worker threads per group
MAX_CANDIDATES = 4096


def own_groups(r: RankData) -> list[tuple[str, tuple[int, ...]]]:
    """The groups ``pg_config`` shows ``r`` in, in creation order (numeric names first)."""
    mine = [(name, ranks) for name, ranks in r.group_ranks if not ranks or r.rank in ranks]
    return sorted(mine, key=lambda g: (0, int(g[0])) if g[0].isdigit() else (1, g[0]))


def _lanes(r: RankData) -> list[str]:
    lanes = {c.lane for c in r.collectives
             if c.group is None and c.lane is not None and not c.kind.point_to_point}
    return sorted(lanes, key=lambda s: (0, int(s)) if s.lstrip("-").isdigit() else (1, s))


def _assignments(lanes: int, groups: int) -> list[tuple[int, ...]]:
    """Monotone maps of ``lanes`` sorted lanes onto ``groups`` groups, each group at most
    :data:`GLOO_THREADS` lanes (at most :data:`MAX_CANDIDATES` of them)."""
    out: list[tuple[int, ...]] = []

    def walk(prefix: list[int], g: int, used: int) -> None:
        if len(out) >= MAX_CANDIDATES:
            return
        if len(prefix) == lanes:
            out.append(tuple(prefix))
            return
        for h in range(g, groups):
            if h == g and used >= GLOO_THREADS:
                continue
            prefix.append(h)
            walk(prefix, h, used + 1 if h == g else 1)
            prefix.pop()

    walk([], 0, 0)
    return out


def _signature(colls: Sequence[Collective]) -> tuple:
    by_step: dict = defaultdict(list)
    for c in colls:
        size = None if c.kind is CollectiveKind.ALL_TO_ALL else c.elements
        by_step[c.step].append((c.kind.value, size))
    return tuple(sorted((k if k is not None else -1, tuple(v)) for k, v in by_step.items()))


class _Rank:
    """One rank's candidate assignments: each a map lane -> group and its signatures."""

    def __init__(self, r: RankData):
        self.rank = r.rank
        self.groups = [name for name, _ in own_groups(r)]
        self.lanes = _lanes(r)
        on: dict[str, list[Collective]] = defaultdict(list)
        for c in r.collectives:
            if c.group is None and c.lane is not None and not c.kind.point_to_point:
                on[c.lane].append(c)
        self.candidates = []
        for a in _assignments(len(self.lanes), len(self.groups)):
            mapping = {lane: self.groups[g] for lane, g in zip(self.lanes, a)}
            per: dict[str, list[Collective]] = defaultdict(list)
            for lane, colls in on.items():
                per[mapping[lane]].extend(colls)
            sigs = {g: _signature(sorted(per.get(g, ()), key=lambda c: (c.step or 0, c.launch_ms)))
                    for g in self.groups}
            self.candidates.append((mapping, sigs))


def _prune(ranks: dict[int, _Rank], members: dict[str, set[int]]) -> bool:
    """Drop every candidate whose signature of a group not every present member of that
    group can give."""
    allowed: dict[str, set] = {}
    for g, group in members.items():
        present = [ranks[o] for o in group if o in ranks and g in ranks[o].groups]
        sets = [{sigs[g] for _, sigs in me.candidates} for me in present]
        allowed[g] = set.intersection(*sets) if sets else set()
    changed = False
    for me in ranks.values():
        keep = [(m, sigs) for m, sigs in me.candidates
                if all(sigs[g] in allowed.get(g, ()) for g in me.groups)]
        changed |= len(keep) != len(me.candidates)
        me.candidates = keep
    return changed


def lane_groups(run_ranks: Sequence[RankData]) -> tuple[dict[int, dict[str, str]], list[int]]:
    """Per rank, lane -> process group name of its collectives without a recorded group
    (gloo traces with several groups); and the ranks it could not resolve."""
    ranks = {r.rank: _Rank(r) for r in run_ranks}
    members: dict[str, set[int]] = defaultdict(set)
    for r in run_ranks:
        for name, group in own_groups(r):
            members[name].update(group or (r.rank,))
    while _prune(ranks, members):
        pass
    out: dict[int, dict[str, str]] = {}
    unresolved = []
    for rank, me in ranks.items():
        maps = {tuple(sorted(m.items())) for m, _ in me.candidates}
        if len(maps) == 1:
            out[rank] = dict(next(iter(maps)))
        else:
            unresolved.append(rank)
    return out, sorted(unresolved)


def one_group(r: RankData) -> Optional[str]:
    """The only group ``r``'s collectives can be on, where ``pg_config`` shows it in one."""
    mine = own_groups(r)
    return mine[0][0] if len(mine) == 1 else None
