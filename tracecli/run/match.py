"""The same collective on every rank.

Keys, best first: the process group and its sequence number where every rank's trace
records them (``Seq``); else the process group's name and the order of launch within it,
step by step (``Process Group Name``, torch >= 2.4); else the order of launch, step by
step, when the run has one process group, or several whose ``pg_config`` says each holds
every rank (an SPMD program launches them in one order on every rank; the kind, size and
dtype checks catch where it did not). Matched collectives must agree on kind, element
count and dtype. What cannot be lined up is kept as :class:`Unmatched`, with why, and
never matched silently.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple, Optional

from .extract import RankCollective
from .load import Run

__all__ = ["Matched", "Unmatched", "Matching", "match"]


class Matched(NamedTuple):
    step: Optional[int]
    index: int  # launch order within the step (on the lowest rank)
    group: Optional[str]
    by_rank: dict[int, RankCollective]

    @property
    def first(self) -> RankCollective:
        return self.by_rank[min(self.by_rank)]


class Unmatched(NamedTuple):
    step: Optional[int]
    group: Optional[str]
    count: int  # collectives left out (the most any rank has)
    reason: str


class Matching(NamedTuple):
    matched: tuple[Matched, ...]
    unmatched: tuple[Unmatched, ...]
    key: str  # how they were matched: "sequence", "group order", "launch order"


def _agree(a: RankCollective, b: RankCollective) -> Optional[str]:
    if a.kind != b.kind:
        return f"{a.kind} against {b.kind}"
    if a.elements is not None and b.elements is not None and a.elements != b.elements:
        return f"{a.elements:,} elements against {b.elements:,}"
    if a.dtype and b.dtype and a.dtype != b.dtype:
        return f"{a.dtype} against {b.dtype}"
    return None


def _line_up(run: Run, lists: dict[int, list[RankCollective]], step, group,
             out: list, lost: list) -> None:
    """Position k of every rank's list is one collective, while they agree."""
    ranks = sorted(lists)
    low = ranks[0]
    n = min(len(v) for v in lists.values())
    most = max(len(v) for v in lists.values())
    for k in range(n):
        ref = lists[low][k]
        for r in ranks[1:]:
            why = _agree(ref, lists[r][k])
            if why:
                lost.append(Unmatched(step, group, most - k, f"collective {k} of the step is "
                                      f"{why} on rank {r} than on rank {low} "
                                      f"({_name(run, r)}:{lists[r][k].line}); the traces do not "
                                      "line up from there (filtered, or several process groups "
                                      "without names)"))
                return
        out.append((step, group, {r: lists[r][k] for r in ranks}))
    if most > n:
        counts = ", ".join(f"rank {r}: {len(lists[r])}" for r in ranks)
        lost.append(Unmatched(step, group, most - n, f"the ranks launched different numbers "
                              f"of collectives ({counts}); the last {most - n} are not "
                              "matched"))


def _name(run: Run, rank: int) -> str:
    for r in run.ranks:
        if r.rank == rank:
            return r.path
    return f"rank {rank}"


def _by_sequence(run: Run, out: list, lost: list) -> None:
    keyed: dict[tuple, dict[int, RankCollective]] = defaultdict(dict)
    for r in run.ranks:
        for c in r.collectives:
            keyed[(c.group, c.seq)][r.rank] = c
    everyone = {r.rank for r in run.ranks}
    for (group, seq), by_rank in keyed.items():
        first = by_rank[min(by_rank)]
        if set(by_rank) != everyone:
            missing = sorted(everyone - set(by_rank))
            lost.append(Unmatched(first.step, group, 1, f"sequence number {seq} of process "
                                  f"group {group} is missing on rank {missing[0]} (a filtered "
                                  "trace, or a group without every rank)"))
            continue
        bad = next((why for rank, c in sorted(by_rank.items()) if (why := _agree(first, c))), None)
        if bad:
            lost.append(Unmatched(first.step, group, 1, f"sequence number {seq} of process "
                                  f"group {group} is {bad} across ranks"))
            continue
        out.append((first.step, group, by_rank))


def match(run: Run) -> Matching:
    """Every collective of ``run`` matched across its ranks, or said unmatched."""
    out: list = []
    lost: list[Unmatched] = []
    every = [c for r in run.ranks for c in r.collectives]
    if len(run.ranks) < 2:
        return Matching(tuple(Matched(c.step, k, c.group, {run.ranks[0].rank: c})
                              for k, c in enumerate(run.ranks[0].collectives)), (), "one rank")
    if every and all(c.seq is not None and c.group is not None for c in every):
        key = "sequence"
        _by_sequence(run, out, lost)
    else:
        named = bool(every) and all(c.group is not None for c in every)
        groups = max((r.groups or 0) for r in run.ranks)
        key = "group order" if named else "launch order"
        spanning = all(r.groups_span_all for r in run.ranks)
        if not named and groups > 1 and spanning:
            key = "launch order (several process groups, each of every rank)"
        per: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
        for r in run.ranks:
            for c in r.collectives:
                per[(c.step, c.group if named else None)][r.rank].append(c)
        for (step, group), lists in per.items():
            for r in run.ranks:
                lists.setdefault(r.rank, [])
            if not named and groups > 1 and not spanning:
                lost.append(Unmatched(step, None, max(len(v) for v in lists.values()),
                                      f"the run has {groups} process groups, its traces do "
                                      "not name them (Process Group Name, torch >= 2.4) and "
                                      "their pg_config does not show each holding every rank: "
                                      "which collective is which cannot be told"))
                continue
            _line_up(run, lists, step, group, out, lost)
    low = run.ranks[0].rank
    out.sort(key=lambda m: (m[2][low].launch, m[2][low].line))
    counters: dict = defaultdict(int)
    matched = []
    for step, group, by_rank in out:
        matched.append(Matched(step, counters[step], group, by_rank))
        counters[step] += 1
    lost.sort(key=lambda u: (u.step is None, u.step or 0, u.group or "", u.reason))
    return Matching(tuple(matched), tuple(lost), key)
