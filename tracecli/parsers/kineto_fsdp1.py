"""FSDP1 (``FullyShardedDataParallel``) in a profiler trace: which unit and phase each hook
and collective belongs to (torch 2.13, ``torch/distributed/fsdp/_runtime_utils.py``).

FSDP1's labels (``FullyShardedDataParallel.<hook>``) name no module, so units are told
apart by FSDP1's own rules, applied to the order the labels ran in:

- the k-th ``FullyShardedDataParallel.forward`` is unit k of the forward order (the first,
  outermost, is the root); nested forwards are nested units. ``_pre_forward`` /
  ``_post_forward`` inside one are its hooks; the ``_post_forward`` order is FSDP1's
  post-forward order (``_exec_order_utils.py:130-150``).
- pre-backward hooks run once per unit (``_runtime_utils.py:644-652``), in the reverse of
  the post-forward order; a post-backward hook runs inside the accumulation of its unit's
  flat-parameter gradient: the unit of that size whose pre-backward ran first and whose
  post-backward has not.
- an all-gather in ``_pre_forward`` (outside ``_pre_forward_prefetch``) or directly in
  ``_pre_backward_hook`` is its own unit's; in ``_pre_forward_prefetch`` the next unit's in
  forward order, in ``_pre_backward_prefetch`` / ``_post_backward_prefetch`` the unit before
  the hook's in post-forward order (``_exec_order_utils.py:88-128``); a reduce-scatter (or
  HSDP all-reduce) in ``_post_backward_hook`` the hook's unit's.
"""

from __future__ import annotations

from typing import Optional

from ..errors import TraceFormatError
from ..model import DTYPE_BYTES, CollectiveKind
from ..model.fsdp import BACKWARD, FORWARD, ROOT
from .kineto_fsdp2 import Attribution, Label, unsharded_elements

__all__ = ["PREFIX1", "label1", "attribute1", "name_units"]

PREFIX1 = "FullyShardedDataParallel."
_HOOKS = ("_pre_forward", "_post_forward", "_pre_backward_hook", "_post_backward_hook",
          "_pre_forward_prefetch", "_pre_backward_prefetch", "_post_backward_prefetch",
          "_root_pre_forward", "_to_kwargs", "rate_limiter", "_post_backward_hook_reshard_only")
_MARK = {"_pre_forward": "pre_forward", "_post_forward": "post_forward",
         "_pre_backward_hook": "pre_backward", "_post_backward_hook": "post_backward"}


def label1(name: str) -> Optional[str]:
    """The hook an FSDP1 label names (``forward`` for the module's forward), or ``None``.

    >>> label1("FullyShardedDataParallel._pre_backward_prefetch"), label1("FSDP::x")
    ('_pre_backward_prefetch', None)
    """
    if not name.startswith(PREFIX1):
        return None
    what = name[len(PREFIX1):]
    return what if what in _HOOKS or what == "forward" else None


def _unit_name(k: int) -> str:
    return ROOT if k == 0 else f"unit{k}"


def attribute1(path: str, labels: list[Label], launches: list, grads: list, grad_numels: list,
               world: int) -> Attribution:
    """FSDP1's attribution of the step's ``labels`` (``Label.unit`` unused: FSDP1 names no
    unit), ``launches`` and ``grads`` (with each gradient's numel, ``grad_numels``)."""
    of = {(id(l.thread), l.i): l for l in labels}
    unit_of: dict[int, str] = {}  # id(label event) -> unit
    units: list[tuple[str, Optional[str]]] = []
    forward_of: dict[int, str] = {}  # id(forward label event) -> unit
    pre_order, post_order = [], []
    for l in labels:
        if l.what != "forward":
            continue
        outer = _enclosing(l, of, ("forward",))
        name = _unit_name(len(units))
        units.append((name, forward_of[id(outer.event)] if outer is not None else None))
        forward_of[id(l.event)] = name
    marks, hooks = {}, set()
    for l in labels:
        if l.what != "forward":
            hooks.add(id(l.event))
        if l.what in ("_pre_forward", "_post_forward"):
            outer = _enclosing(l, of, ("forward",))
            if outer is None:
                raise _unpaired(path, l, "outside any FullyShardedDataParallel.forward")
            unit_of[id(l.event)] = forward_of[id(outer.event)]
            (pre_order if l.what == "_pre_forward" else post_order).append(unit_of[id(l.event)])
    size = _unit_sizes(launches, of, unit_of, world)
    waiting = [u for u in dict.fromkeys(reversed(post_order))]
    pending: list[str] = []
    gradient_unit, grad_at = {}, {}
    for k, (thread, i) in enumerate(grads):
        grad_at[(id(thread), thread.parent[i])] = k
    for l in labels:
        if l.what == "_pre_backward_hook":
            if not waiting:
                raise _unpaired(path, l, "one more pre-backward hook than units in forward")
            unit_of[id(l.event)] = waiting.pop(0)
            pending.append(unit_of[id(l.event)])
        elif l.what == "_post_backward_hook":
            k = grad_at.get((id(l.thread), l.thread.parent[l.i]))
            numel = grad_numels[k] if k is not None else None
            fits = [u for u in pending if numel is None or size.get(u) is None
                    or size[u] == world * -(-numel // world)]
            if not fits:
                raise _unpaired(path, l, "no unit's all-gather matches its gradient's size")
            unit_of[id(l.event)] = fits[0]
            pending.remove(fits[0])
            if k is not None:
                gradient_unit[k] = fits[0]
        if l.what in _MARK and id(l.event) in unit_of:
            marks[id(l.event)] = (_MARK[l.what], unit_of[id(l.event)])
    comms = [_comm(path, launch, of, unit_of, pre_order, post_order) for launch in launches]
    comms = [c for c in comms if c is not None]
    layouts = {}
    for k, unit in gradient_unit.items():
        numel = grad_numels[k]
        if numel is not None:
            layouts[unit] = ((-(-numel // world),), ((numel,),))
    return Attribution("fsdp1", marks, hooks, comms, units, {}, {}, layouts, gradient_unit,
                       set())


def _enclosing(label: Label, of: dict, whats: tuple[str, ...]) -> Optional[Label]:
    thread, j = label.thread, label.thread.parent[label.i]
    while j >= 0:
        found = of.get((id(thread), j))
        if found is not None and found.what in whats:
            return found
        j = thread.parent[j]
    return None


def _chain(launch, of: dict) -> list[Label]:
    thread, j, out = launch.thread, launch.thread.parent[launch.i], []
    while j >= 0:
        if (id(thread), j) in of:
            out.append(of[(id(thread), j)])
        j = thread.parent[j]
    return out


def _unit_sizes(launches: list, of: dict, unit_of: dict, world: int) -> dict[str, int]:
    """Each unit's all-gather elements, from the all-gathers of its own ``_pre_forward``."""
    sizes: dict[str, int] = {}
    for launch in launches:
        chain = _chain(launch, of)
        if launch.kind is CollectiveKind.ALL_GATHER and chain and chain[0].what == "_pre_forward":
            n = unsharded_elements(launch, world)
            if n is not None:
                sizes.setdefault(unit_of[id(chain[0].event)], n)
    return sizes


def _comm(path, launch, of, unit_of, pre_order, post_order):
    """``(launch, unit, phase, via, by)`` of one collective, ``None`` outside FSDP1's hooks."""
    chain = _chain(launch, of)
    hooks = [c for c in chain if c.what != "forward"]
    if not hooks:
        return None
    inner = hooks[0]
    owner = next((c for c in hooks if c.what in _MARK), None)
    if owner is None or id(owner.event) not in unit_of:
        raise _unpaired(path, inner, "a collective FSDP1 issued outside its unit's hooks")
    by = unit_of[id(owner.event)]
    if inner.what == "_pre_forward_prefetch":
        k = pre_order.index(by) + 1
        if k >= len(pre_order):
            raise _unpaired(path, inner, "a forward prefetch past the last unit")
        return launch, pre_order[k], FORWARD, "forward_prefetch", by
    if inner.what in ("_pre_backward_prefetch", "_post_backward_prefetch"):
        k = post_order.index(by) - 1 if by in post_order else -1
        if k < 0:
            raise _unpaired(path, inner, "a backward prefetch before the first unit")
        via = "backward_prefetch" if inner.what == "_pre_backward_prefetch" else "post_backward_prefetch"
        return launch, post_order[k], BACKWARD, via, by
    phase = FORWARD if owner.what == "_pre_forward" else BACKWARD
    via = "post_backward" if launch.kind is not CollectiveKind.ALL_GATHER else "unshard"
    return launch, by, phase, via, by


def _unpaired(path: str, label: Label, what: str) -> TraceFormatError:
    return TraceFormatError(f"FSDP1's label {label.event.name!r}: {what}; its labels do not "
                            "pair with its collectives (a trace cut short, or edited?)",
                            path=path, line=label.event.line)


def name_units(run, variables, sizes_path: str):
    """``run`` with its FSDP1 units named by their modules, from a parameter sidecar
    (``model.named_parameters()`` order, which is the pre-order FSDP1 flattens in): the
    root is ``root``; each other unit, innermost first in forward order, takes the first
    module, in that order, holding its child units' modules and no other unit's, whose own
    parameters flatten to the unit's gradient (``FlatParameter``: their sum, or with
    ``use_orig_params=True`` each aligned to 16 bytes and the total padded to a multiple of
    the world, ``_flat_param.py:688-776``). Unchanged, with a note, where none fits."""
    order: dict[str, int] = {}
    for v in variables:
        parts = v.name.split(".")
        for k in range(len(parts)):
            order.setdefault(".".join(parts[:k]), len(order))
    children: dict[str, list[str]] = {}
    for u in run.units:
        if u.parent is not None:
            children.setdefault(u.parent, []).append(u.name)
    depth = {u.name: _depth(run, u) for u in run.units}
    module: dict[str, str] = {ROOT: ""}
    for u in sorted((u for u in run.units if u.parent is not None),
                    key=lambda u: (-depth[u.name], run.units.index(u))):
        inner = [module[c] for c in children.get(u.name, ())]
        numel = u.grad_shapes[0][0] if u.grad_shapes else None
        taken = set(module.values())
        found = next((m for m in sorted(order, key=order.get) if m not in taken
                      and all(_under(c, m) for c in inner)
                      and not any(_under(t, m) for t in taken if t and t not in inner)
                      and _fits(m, inner, variables, numel, run.shard_size)), None)
        if found is None:
            return run._replace(notes=run.notes + (
                f"{sizes_path} names no module that flattens to FSDP1 unit {u.name}'s "
                f"{numel} elements: units keep their order names",))
        module[u.name] = found
    names = {u: (m or ROOT) for u, m in module.items()}
    return _renamed(run, names, sizes_path)


def _depth(run, unit) -> int:
    d = 0
    while unit.parent is not None:
        unit = run.unit(unit.parent)
        d += 1
    return d


def _under(inner: str, outer: str) -> bool:
    """Whether module (or parameter) ``inner`` is ``outer`` or inside it."""
    return outer == "" or inner == outer or inner.startswith(outer + ".")


def _fits(m: str, inner: list[str], variables, numel: Optional[int], world: int) -> bool:
    """Whether module ``m``'s parameters outside the ``inner`` units' modules flatten to
    ``numel`` elements, plainly or aligned (``use_orig_params=True``)."""
    own = [v for v in variables if _under(v.name, m)
           and not any(v.name.startswith(c + ".") for c in inner)]
    if not own or numel is None:
        return False
    plain = sum(v.elements for v in own)
    total = 0
    for v in own:
        align = 16 // DTYPE_BYTES.get(v.dtype, 4)
        if total % align:
            total += align - total % align
        total += v.elements
    return numel in (plain, -(-total // world) * world)


def _renamed(run, names: dict[str, str], sizes_path: str):
    def n(unit: Optional[str]) -> Optional[str]:
        return names.get(unit, unit) if unit is not None else None

    units = tuple(u._replace(name=n(u.name), parent=n(u.parent)) for u in run.units)
    comms = tuple(c._replace(unit=n(c.unit), by=n(c.by)) for c in run.comms)
    program = tuple(m._replace(unit=n(m.unit)) if m.unit else m for m in run.program)
    notes = tuple(x for x in run.notes if not x.startswith("FSDP1's labels name no module"))
    return run._replace(units=units, comms=comms, program=program, named_by="sidecar",
                        notes=notes + (f"FSDP1's units named by the modules of {sizes_path}",))
