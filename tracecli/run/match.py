"""The same collective on every rank of its group.

Keys, best first: the process group and its sequence number where every rank's trace
records them (``Seq``); else each collective's process group (``Process Group Name``, or,
on gloo, inferred from the threads it ran on and ``pg_config``: :mod:`.groups`) and its
order within that group, step by step; else, with one process group (or several that
``pg_config`` shows each holding every rank), the order of launch. Sends and recvs are
matched apart, by their peers and their order (:func:`.align.pairs`).

Within a group, position by position, the collectives of its members must agree on kind,
element count and dtype (an all-to-all's counts differ per rank by design: kind and order
are what must agree, and each rank's input splits must be what its peers expect). Where
they do not, :func:`.align.align` says which collective and why in one sentence and
resynchronises on the next one every member shares: nothing after is dropped.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple, Optional

from ..model import Collective
from .align import Matched, Unmatched, align, pairs
from .groups import lane_groups, one_group, own_groups
from .load import Run

__all__ = ["Matched", "Unmatched", "Matching", "match", "group_members"]


class Matching(NamedTuple):
    matched: tuple[Matched, ...]
    unmatched: tuple[Unmatched, ...]
    key: str  # how they were matched


def group_members(run: Run) -> dict[Optional[str], tuple[int, ...]]:
    """Each group's ranks as ``pg_config`` lists them (every rank of the world for the
    default, unnamed group)."""
    out: dict[Optional[str], set[int]] = defaultdict(set)
    for r in run.ranks:
        for name, ranks in r.group_ranks:
            out[name].update(ranks)
    world = run.world_size
    out[None] = set(range(world)) if world else {r.rank for r in run.ranks}
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _by_sequence(run: Run, out: list, lost: list) -> None:
    keyed: dict[tuple, dict[int, Collective]] = defaultdict(dict)
    for r in run.ranks:
        for c in r.collectives:
            keyed[(c.group, c.seq)][r.rank] = c
    present = {r.rank for r in run.ranks}
    members = group_members(run)
    for (group, seq), by_rank in keyed.items():
        first = by_rank[min(by_rank)]
        expected = set(members.get(group, ())) & present or present
        if set(by_rank) != expected:
            missing = sorted(expected - set(by_rank))
            if missing:
                lost.append(Unmatched(first.step, group, 1, f"sequence number {seq} of process "
                                      f"group {group} is missing on rank {missing[0]} (a "
                                      "filtered trace?): it is matched on no rank"))
                continue
        bad = next((f"{a.kind.value} against {b.kind.value}" for a in by_rank.values()
                    for b in by_rank.values() if a.kind is not b.kind), None)
        if bad:
            lost.append(Unmatched(first.step, group, 1, f"sequence number {seq} of process "
                                  f"group {group} is {bad} across ranks: it is matched on no rank"))
            continue
        out.append(Matched(first.step, 0, group, by_rank, members.get(group, ())))


def _groups_of(run: Run) -> tuple[dict[int, dict[int, Optional[str]]], str, list[Unmatched]]:
    """Per rank, the group of each of its group collectives (by position in the rank's
    list; ``None``: the run's one group, or launch order across groups that each hold every
    rank), how they were found, and what could not be placed."""
    lost: list[Unmatched] = []
    named = all(c.group is not None for r in run.ranks for c in r.collectives
                if not c.kind.point_to_point)
    several = any(len(own_groups(r)) > 1 or (not r.group_ranks and (r.groups or 1) > 1)
                  for r in run.ranks)
    lanes: dict[int, dict[str, str]] = {}
    key = "group order" if named else "launch order"
    if not named and several:
        if all((r.backend or "").startswith("gloo") for r in run.ranks):
            lanes, unresolved = lane_groups(run.ranks)
            key = "group order (gloo's groups from their threads and pg_config)"
            lost += [Unmatched(None, None, 0, f"rank {rank}'s collectives fit its pg_config's "
                               "groups in no way its peers agree with (by gloo's threads): its "
                               "group collectives are matched on no rank") for rank in unresolved]
        elif all(r.groups_span_all for r in run.ranks):
            key = "launch order (several process groups, each of every rank)"
        else:
            lost += [Unmatched(None, None, 0, "the run has several process groups and its "
                               "traces name none (Process Group Name, torch >= 2.4): rank "
                               f"{r.rank}'s group collectives cannot be told apart and are "
                               "matched on no rank") for r in run.ranks]
            return {}, key, lost
    names = {one_group(r) for r in run.ranks}
    common = names.pop() if len(names) == 1 else None  # the run's one group, by its name
    out: dict[int, dict[int, Optional[str]]] = {}
    for r in run.ranks:
        mine, only, placed = lanes.get(r.rank), one_group(r), {}
        for k, c in enumerate(r.collectives):
            if c.kind.point_to_point:
                continue
            if c.group is not None:
                placed[k] = c.group
            elif not several:
                placed[k] = common
            elif key.startswith("launch order"):
                placed[k] = None
            elif mine is not None and c.lane in mine:
                placed[k] = mine[c.lane]
            elif only is not None:
                placed[k] = only
        out[r.rank] = placed
    return out, key, lost


def match(run: Run) -> Matching:
    """Every collective of ``run`` matched across its group's ranks, or said unmatched."""
    if len(run.ranks) < 2:
        low = run.ranks[0]
        return Matching(tuple(Matched(c.step, k, c.group, {low.rank: c}, (low.rank,))
                              for k, c in enumerate(low.collectives)), (), "one rank")
    out: list[Matched] = []
    lost: list[Unmatched] = []
    every = [c for r in run.ranks for c in r.collectives if not c.kind.point_to_point]
    if every and all(c.seq is not None and c.group is not None for c in every):
        key = "sequence"
        _by_sequence(run, out, lost)
    else:
        placed, key, lost = _groups_of(run)
        members = group_members(run)
        per: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
        for r in run.ranks:
            for k, group in placed.get(r.rank, {}).items():
                c = r.collectives[k]
                per[(c.step, group)][r.rank].append(c)
        present = {r.rank for r in run.ranks}
        paths = {r.rank: r.path for r in run.ranks}
        for (step, group), lists in per.items():
            ranks = set(members.get(group, ())) & present or set(lists)
            for rank in ranks:
                lists.setdefault(rank, [])
            align(step, group, {r: lists[r] for r in sorted(ranks)}, members.get(group, ()),
                  paths, out, lost)
    p2p_out, p2p_lost = pairs(run)
    out.extend(p2p_out)
    lost.extend(p2p_lost)
    return Matching(*_ordered(run, out, lost), key + (" and peers for sends and recvs" if p2p_out or p2p_lost else ""))


def _ordered(run: Run, out: list[Matched], lost: list[Unmatched]):
    """Matched in launch order within each step (on each one's lowest rank), indexed."""
    out.sort(key=lambda m: (m.step is None, m.step or 0, m.first.launch_ms, min(m.by_rank),
                            m.first.line or 0))
    counters: dict = defaultdict(int)
    matched = []
    for m in out:
        matched.append(m._replace(index=counters[m.step]))
        counters[m.step] += 1
    lost.sort(key=lambda u: (u.step is None, u.step or 0, u.group or "", u.reason))
    return tuple(matched), tuple(lost)
