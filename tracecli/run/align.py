"""Lining up one group's collectives across its ranks, and sends with their recvs.

:func:`align` walks the members' lists of one process group in one step, position by
position. Where the members' collectives agree (kind, element count, dtype; an
all-to-all by kind, its counts being each rank's own) they are one collective. Where they
do not, it finds the nearest point where every member agrees again (skipping the fewest
collectives, each rank looking at most :data:`WINDOW` ahead), says in one sentence what was
skipped on which rank and why, and goes on from there: a disagreement never drops the rest
of the step. An all-to-all-v whose splits disagree (rank r's input split for rank s is not
rank s's output split for r) is said too: its matching is then not trusted.

:func:`pairs` matches point-to-point traffic: the k-th send from rank a to rank b in a step
is the k-th recv on b from a (torch's send and recv block in that order); a send without its
recv (or the reverse) is said, naming the peer.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional, Sequence

from typing import NamedTuple

from ..model import Collective, CollectiveKind

__all__ = ["Matched", "Unmatched", "align", "pairs", "WINDOW", "disagree"]

WINDOW = 16


class Matched(NamedTuple):
    step: Optional[int]
    index: int  # launch order within the step (on the lowest rank), set once all are matched
    group: Optional[str]
    by_rank: dict[int, Collective]
    members: tuple[int, ...]  # the group's ranks, present in the run or not (pg_config)

    @property
    def first(self) -> Collective:
        return self.by_rank[min(self.by_rank)]

    @property
    def missing(self) -> tuple[int, ...]:
        """Members of its group with no trace in the run."""
        return tuple(r for r in self.members if r not in self.by_rank)


class Unmatched(NamedTuple):
    step: Optional[int]
    group: Optional[str]
    count: int  # collectives left out
    reason: str


def disagree(a: Collective, b: Collective) -> Optional[str]:
    """Why ``a`` and ``b`` (one group, one position) are not the same collective."""
    if a.kind is not b.kind:
        return f"{a.kind.value} against {b.kind.value}"
    if a.kind is CollectiveKind.ALL_TO_ALL:
        return None  # each rank sends what it holds: counts differ by design
    if a.elements is not None and b.elements is not None and a.elements != b.elements:
        return f"{a.elements:,} elements against {b.elements:,}"
    if a.dtype and b.dtype and a.dtype != b.dtype:
        return f"{a.dtype} against {b.dtype}"
    return None


def _what(c: Collective) -> str:
    size = f" of {c.elements:,} elements" if c.elements is not None else ""
    return f"{c.kind.value}{size}"


def _resync(lists: dict[int, Sequence[Collective]], at: dict[int, int]) -> Optional[dict[int, int]]:
    """How many to skip on each rank so that every head agrees, skipping the fewest."""
    ranks = sorted(lists)
    ref = ranks[0]
    best: Optional[tuple[int, dict[int, int]]] = None
    for d in range(min(WINDOW, len(lists[ref]) - at[ref])):
        cand = lists[ref][at[ref] + d]
        skips = {ref: d}
        for s in ranks[1:]:
            e = next((e for e in range(min(WINDOW, len(lists[s]) - at[s]))
                      if disagree(cand, lists[s][at[s] + e]) is None), None)
            if e is None:
                break
            skips[s] = e
        else:
            cost = sum(skips.values())
            if best is None or cost < best[0]:
                best = (cost, skips)
    return None if best is None else best[1]


def _skipped(step, group, lists, at, skips, paths, lost: list) -> None:
    for rank, n in skips.items():
        if n == 0:
            continue
        c = lists[rank][at[rank]]
        others = [r for r in lists if r != rank]
        theirs = "; ".join(f"rank {o} has {_what(lists[o][at[o]])}" for o in others[:2]
                           if at[o] < len(lists[o]))
        lost.append(Unmatched(step, group, n, f"rank {rank}'s {_what(c)} ({paths.get(rank, '?')}:"
                              f"{c.line}){f' and the {n - 1} after it' if n > 1 else ''} match "
                              f"nothing on the other ranks at that point ({theirs or 'they have none left'}); "
                              "matching resumes at the next collective every rank shares"))


def _splits_agree(by_rank: dict[int, Collective]) -> Optional[str]:
    """An all-to-all-v's splits against its peers': rank r's input split for s must be
    rank s's output split for r (ranks index the group's members in order)."""
    ranks = sorted(by_rank)
    if any(by_rank[r].splits is None for r in ranks):
        return None
    for i, r in enumerate(ranks):
        ins = by_rank[r].splits[0]
        for j, s in enumerate(ranks):
            outs = by_rank[s].splits[1]
            if len(ins) != len(ranks) or len(outs) != len(ranks):
                return f"rank {r} splits its all-to-all {len(ins)} ways in a group of {len(ranks)}"
            if ins[j] != outs[i]:
                return (f"rank {r} sends {ins[j]:,} rows to rank {s}, which expects "
                        f"{outs[i]:,} from it")
    return None


def align(step, group, lists: dict[int, Sequence[Collective]], members: tuple[int, ...],
          paths: dict[int, str], out: list, lost: list) -> None:
    """Match one group's collectives of one step across its present ranks (``lists``)."""
    at = {r: 0 for r in lists}
    while all(at[r] < len(lists[r]) for r in lists):
        heads = {r: lists[r][at[r]] for r in lists}
        ref = heads[min(heads)]
        if all(disagree(ref, c) is None for c in heads.values()):
            why = _splits_agree(heads) if ref.kind is CollectiveKind.ALL_TO_ALL else None
            if why:
                lost.append(Unmatched(step, group, 1, f"the {_what(ref)} at "
                                      f"{paths.get(min(heads), '?')}:{ref.line} does not add "
                                      f"up across ranks ({why}): it is matched on no rank"))
            else:
                out.append(Matched(step, 0, group, heads, members or tuple(sorted(lists))))
            for r in at:
                at[r] += 1
            continue
        skips = _resync(lists, at)
        if skips is None:
            low = min(heads)
            other = next(r for r, c in heads.items() if disagree(ref, c) is not None)
            counts = ", ".join(f"rank {r}: {len(lists[r]) - at[r]}" for r in sorted(lists))
            lost.append(Unmatched(step, group, max(len(lists[r]) - at[r] for r in lists),
                                  f"from collective {at[low]} of the step on, the ranks never "
                                  f"agree again: rank {low} has {_what(ref)} where rank {other} "
                                  f"has {_what(heads[other])} ({paths.get(other, '?')}:"
                                  f"{heads[other].line}), {disagree(ref, heads[other])}; the "
                                  f"rest ({counts}) match nothing"))
            return
        _skipped(step, group, lists, at, skips, paths, lost)
        for r, n in skips.items():
            at[r] += n
    left = {r: len(lists[r]) - at[r] for r in lists if len(lists[r]) > at[r]}
    if left:
        counts = ", ".join(f"rank {r}: {n}" for r, n in sorted(left.items()))
        lost.append(Unmatched(step, group, max(left.values()), f"the last collectives of the "
                              f"step ({counts}) match nothing on the other ranks (a rank "
                              "launched more, or a trace lost some)"))


def pairs(run) -> tuple[list[Matched], list[Unmatched]]:
    """Each send matched with its recv, in order, per step and (sender, receiver)."""
    sends: dict[tuple, list[Collective]] = defaultdict(list)
    recvs: dict[tuple, list[Collective]] = defaultdict(list)
    present = {r.rank for r in run.ranks}
    out: list[Matched] = []
    lost: list[Unmatched] = []
    for r in run.ranks:
        for c in r.collectives:
            if not c.kind.point_to_point:
                continue
            if c.peer is None:
                lost.append(Unmatched(c.step, c.group, 1, f"rank {r.rank}'s {_what(c)} "
                                      f"({r.path}:{c.line}) records no peer: it is matched on no rank"))
            elif c.peer not in present:
                lost.append(Unmatched(c.step, c.group, 1, f"rank {r.rank}'s {_what(c)} "
                                      f"({r.path}:{c.line}) is with rank {c.peer}, which has no "
                                      "trace here"))
            elif c.kind is CollectiveKind.SEND:
                sends[(c.step, r.rank, c.peer)].append(c)
            else:
                recvs[(c.step, c.peer, r.rank)].append(c)
    for key in sorted(set(sends) | set(recvs), key=lambda k: (k[0] is None, k[0] or 0, k[1], k[2])):
        step, src, dst = key
        a, b = sends.get(key, []), recvs.get(key, [])
        for k, (s, v) in enumerate(zip(a, b)):
            why = disagree(s._replace(kind=v.kind), v)
            if why:
                lost.append(Unmatched(step, None, 1, f"send {k} from rank {src} to rank {dst} "
                                      f"is {why} on the receiver: it is matched on no rank"))
                continue
            out.append(Matched(step, 0, s.group or v.group, {src: s, dst: v}, (src, dst)))
        if len(a) != len(b):
            more, fewer = ("sends", "recvs") if len(a) > len(b) else ("recvs", "sends")
            lost.append(Unmatched(step, None, abs(len(a) - len(b)), f"rank {src} to rank {dst}: "
                                  f"{max(len(a), len(b))} {more} against {min(len(a), len(b))} "
                                  f"{fewer} in the step; the last {abs(len(a) - len(b))} match nothing"))
    return out, lost
