"""What a planned FSDP step is made of: which units (the wrapping), what each does after
forward, what it prefetches, the dtypes and the mesh, and the step's program with the
planned units' hooks.

The program is the run's: its compute between FSDP's hooks, in the order they ran. A
wrapping coarser than the run's keeps that compute and moves the hooks: a unit unwrapped
into the unit around it loses its hooks (its parameters join that unit's); consecutive
sibling units grouped into one (``fully_shard([a, b])``) keep the group's first
pre-forward, its last post-forward, its first pre-backward and its last post-backward
(FSDP2 registers the group's post-backward on its first module's inputs and its
pre-backward on its last module's output, ``_fsdp_state.py:289-330``). A finer wrapping
than the run's would need compute the trace does not split: it is refused.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional

from ...errors import PlanError
from ...model.fsdp import ROOT, FsdpMark
from .model import FsdpInput, Unit

__all__ = ["Setup", "wrap_units", "program_for", "WRAP_HELP"]

WRAP_HELP = ("run (the run's own units), root (only the root unit), every:K (K consecutive "
             "sibling units as one, fully_shard([...])), or a comma list of the run's units to "
             "keep (the others join the unit around them)")


class Setup(NamedTuple):
    """A planned FSDP configuration: units in forward order and the knobs, resolved."""

    system: str
    shard: int
    replicate: int
    units: tuple[Unit, ...]
    program: tuple[FsdpMark, ...]
    reshard: Mapping[str, object]  # unit -> True, False or the int group it reshards to
    explicit_forward: Mapping[str, tuple[str, ...]]
    explicit_backward: Mapping[str, tuple[str, ...]]
    param_dtype: str  # what all-gathers carry
    reduce_dtype: str  # what reduce-scatters and all-reduces carry
    grad_dtype: str  # the unsharded gradients' dtype (= param_dtype)
    backward_prefetch: str = "pre"  # FSDP1: pre, post, none
    forward_prefetch: bool = False  # FSDP1
    limit_all_gathers: bool = True  # FSDP1
    run_shard: int = 0  # the run's shard size (sizes are exact there)

    def unit(self, name: str) -> Unit:
        return next(u for u in self.units if u.name == name)


def wrap_units(f: FsdpInput, wrap: str) -> tuple[tuple[Unit, ...], dict[str, str]]:
    """The units of ``wrap`` (:data:`WRAP_HELP`) and where each run unit went."""
    names = [u.name for u in f.units]
    text = wrap.strip()
    if text in ("", "run"):
        return f.units, {n: n for n in names}
    if text == "root":
        keep = {ROOT} & set(names) or {names[0]}
        return _merged(f, keep)
    if text.startswith("every:"):
        k = text[len("every:"):]
        if not k.isdigit() or int(k) < 1:
            raise PlanError(f"--fsdp-wrap every:K needs a whole K of at least 1, not {k!r}")
        return _grouped(f, int(k))
    wanted = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise PlanError(f"--fsdp-wrap names {unknown[0]!r}, which is not one of the run's units "
                        f"({', '.join(names[:8])}{', ...' if len(names) > 8 else ''}): a unit "
                        "with no parameters of its own in this run, or a module inside one, "
                        "whose compute the trace does not split; " + WRAP_HELP)
    return _merged(f, set(wanted) | {names[0]})


def _merged(f: FsdpInput, keep: set[str]) -> tuple[tuple[Unit, ...], dict[str, str]]:
    """The run's units, each not kept joined to the nearest kept unit around it."""
    by = {u.name: u for u in f.units}
    home = {}
    for u in f.units:
        n = u.name
        while n not in keep and by[n].parent is not None:
            n = by[n].parent
        home[u.name] = n
    joined: dict[str, list[Unit]] = {}
    for v in f.units:
        joined.setdefault(home[v.name], []).append(v)
    units = []
    for u in f.units:
        if u.name not in keep:
            continue
        mine = joined[u.name]
        units.append(u._replace(params=tuple(p for v in mine for p in v.params),
                                gradients=tuple(sorted(g for v in mine for g in v.gradients)),
                                parent=_kept_parent(by, u, keep)))
    return tuple(units), home


def _kept_parent(by: Mapping[str, Unit], u: Unit, keep: set[str]) -> Optional[str]:
    p = u.parent
    while p is not None and p not in keep:
        p = by[p].parent
    return p


def _grouped(f: FsdpInput, k: int) -> tuple[tuple[Unit, ...], dict[str, str]]:
    """Runs of ``k`` consecutive units with one parent, each run one unit."""
    home, units, run, parent = {}, [], [], object()
    parents = {u.parent for u in f.units}
    for u in list(f.units) + [None]:
        if u is not None and u.parent is not None and u.parent == parent and len(run) < k \
                and u.name not in parents and run[-1].name not in parents:
            run.append(u)
            continue
        if run:
            name = ", ".join(v.name for v in run)
            for v in run:
                home[v.name] = name
            units.append(Unit(name, run[0].parent, tuple(p for v in run for p in v.params),
                              tuple(m for v in run for m in v.members), run[0].deferred,
                              tuple(sorted(g for v in run for g in v.gradients))))
        run, parent = ([u], u.parent) if u is not None else ([], None)
    by_name = {}
    for u in units:
        by_name[u.name] = u._replace(parent=home.get(u.parent, u.parent) if u.parent else None)
    return tuple(by_name.values()), home


def program_for(program: tuple[FsdpMark, ...], home: Mapping[str, str],
                units: tuple[Unit, ...]) -> tuple[FsdpMark, ...]:
    """The run's program with the planned units' hooks (see the module's docstring)."""
    kept = {u.name for u in units}
    marks = []
    for m in program:
        if m.kind == "compute":
            marks.append(m)
            continue
        target = home.get(m.unit)
        if target is None:
            raise PlanError(f"the run's program names unit {m.unit!r}, which has no forward")
        if target == m.unit:
            marks.append(m)
        elif target in kept and "," in target:  # a member of a group
            marks.append(m._replace(unit=target))
    return _group_marks(tuple(marks), {u.name for u in units if "," in u.name})


def _group_marks(marks: tuple[FsdpMark, ...], groups: set[str]) -> tuple[FsdpMark, ...]:
    """A group's first pre-forward and pre-backward, its last post-forward and
    post-backward, per pass."""
    if not groups:
        return marks
    at: dict[tuple[str, str], list[int]] = {}
    for i, m in enumerate(marks):
        if m.unit in groups:
            at.setdefault((m.unit, m.kind), []).append(i)
    first = {"pre_forward": True, "post_forward": False, "pre_backward": True,
             "post_backward": False}
    drop = set()
    for (_, kind), where in at.items():
        keep = where[0] if first.get(kind, True) else where[-1]
        drop.update(i for i in where if i != keep)
    return tuple(m for i, m in enumerate(marks) if i not in drop)
