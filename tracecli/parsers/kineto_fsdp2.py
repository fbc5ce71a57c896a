"""FSDP2 (``fully_shard``) in a profiler trace: which unit and phase each of its labels and
collectives belongs to (torch 2.13, ``torch/distributed/fsdp/_fully_shard``).

FSDP2 labels its hooks ``FSDP::<what> (<module fqn>)`` (``_with_fqn``,
``_fsdp_param_group.py:1017-1022``: no suffix for the root, whose FQN is empty; `` [pg=N]``
when a module holds several parameter groups), and its prefetches ``FSDP::forward_prefetch
for <fqn>`` / ``FSDP::backward_prefetch for <fqn>`` (``:844``, an empty name for the root).

- The unit of a collective is the one named by the innermost ``FSDP::all_gather (u)`` or
  ``FSDP::post_backward_reduce (u)`` label around it (a prefetch label names its target,
  and may hold no collective when the target was already unsharded).
- An all-gather is ``backward`` inside ``FSDP::pre_backward`` or a backward prefetch, or
  after the step's first ``FSDP::pre_backward``; reduce-scatters and all-reduces are
  ``backward``.
- Explicit prefetches (``set_modules_to_*_prefetch``) are labelled at top level, after the
  prefetching unit's ``pre_forward`` / ``pre_backward`` (``_fsdp_state.py:313-320``,
  ``:385-391``); implicit backward prefetches inside its ``FSDP::pre_backward``.
- ``fsdp::all_gather_copy_in`` lists each parameter's padded shard numel in layout order;
  ``fsdp::chunk_cat`` the unpadded gradient shapes, in the same order.

>>> label2("FSDP::pre_forward (blocks.0)"), label2("FSDP::post_backward_rs_wait ()")
(('pre_forward', 'blocks.0'), ('post_backward_rs_wait', 'root'))
>>> label2("FSDP::backward_prefetch for "), label2("FSDP::all_gather (layers.1) [pg=4]")
(('backward_prefetch', 'root'), ('all_gather', 'layers.1'))
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, NamedTuple, Optional

from ..errors import TraceFormatError
from ..model import CollectiveKind
from ..model.fsdp import BACKWARD, FORWARD, ROOT

__all__ = ["label2", "Label", "Attribution", "attribute2", "PREFIX2", "unsharded_elements"]

PREFIX2 = "FSDP::"
_NAMED = re.compile(r"(\w+)(?: \(([^()]*)\))?(?: \[pg=\d+\])?$")

# Labels whose time is FSDP's, not the model's compute (every FSDP2 label).
_MARK = {"pre_forward": "pre_forward", "post_forward": "post_forward",
         "pre_backward": "pre_backward", "post_backward_reshard": "post_backward"}


def label2(name: str) -> Optional[tuple[str, str]]:
    """``(what, unit)`` of an FSDP2 label, ``None`` for another name."""
    if not name.startswith(PREFIX2):
        return None
    rest = name[len(PREFIX2):]
    if " for " in rest:
        what, target = rest.split(" for ", 1)
        return what, target or ROOT
    m = _NAMED.match(rest)
    if m is None:
        return None
    return m.group(1), m.group(2) or ROOT


class Label(NamedTuple):
    """One FSDP label of the step: where it is (thread, index), what and whose."""

    thread: Any
    i: int
    event: Any
    what: str
    unit: str


class Attribution(NamedTuple):
    """What a system's labels say: program marks by event, each FSDP collective's unit,
    phase and issuer, the units in forward order with their parents, explicit prefetch
    lists, each unit's layout, and the gradients' units."""

    system: str
    marks: dict  # id(event) -> (mark kind, unit)
    hooks: set  # id(event) of labels whose time is FSDP's own
    comms: list  # (launch, unit, phase, via, by)
    units: list  # (name, parent)
    explicit_forward: dict
    explicit_backward: dict
    layouts: dict  # unit -> (shard numels, grad shapes)
    gradient_unit: dict  # gradient index -> unit
    deferred: set


def _ancestors(thread, i: int):
    j = thread.parent[i]
    while j >= 0:
        yield j
        j = thread.parent[j]


def attribute2(path: str, labels: list[Label], launches: list, grads: list,
               world: int) -> Attribution:
    """FSDP2's attribution of the step's ``labels`` (time order), ``launches`` (the step's
    collectives) and ``grads`` (``(thread, index)`` of each gradient's accumulation)."""
    of = {(id(l.thread), l.i): l for l in labels}
    marks, hooks = {}, {id(l.event) for l in labels}
    units: list[tuple[str, Optional[str]]] = []
    stack: list[str] = []
    seen: set[str] = set()
    fwd_lists: dict[str, list[str]] = defaultdict(list)
    bwd_lists: dict[str, list[str]] = defaultdict(list)
    last_pre = {"forward": None, "backward": None}
    first_backward = None
    windows: dict[str, list[float]] = {}
    for l in labels:
        if l.what in _MARK:
            marks[id(l.event)] = (_MARK[l.what], l.unit)
        if l.what == "pre_forward":
            if l.unit not in seen:
                seen.add(l.unit)
                units.append((l.unit, stack[-1] if stack else None))
            stack.append(l.unit)
            last_pre["forward"] = l.unit
        elif l.what == "post_forward" and l.unit in stack:
            del stack[len(stack) - 1 - stack[::-1].index(l.unit):]
        elif l.what == "pre_backward":
            last_pre["backward"] = l.unit
            if first_backward is None:
                first_backward = l.event.ts
            windows.setdefault(l.unit, [l.event.ts, float("inf")])
        elif l.what == "post_backward_reshard" and l.unit in windows:
            windows[l.unit][1] = l.event.ts
        elif l.what in ("forward_prefetch", "backward_prefetch") and not _nested(l, of):
            pass_ = l.what.split("_")[0]
            owner = last_pre[pass_]
            if owner is not None:
                (fwd_lists if pass_ == "forward" else bwd_lists)[owner].append(l.unit)
    comms, layouts, deferred = [], {}, set()
    for launch in launches:
        found = _place(launch, of)
        if found is None:
            continue
        unit, chain = found
        whats = [c.what for c in chain]
        phase = FORWARD
        if launch.kind is not CollectiveKind.ALL_GATHER or "pre_backward" in whats \
                or "backward_prefetch" in whats or (first_backward is not None
                                                    and launch.event.ts >= first_backward):
            phase = BACKWARD
        via, by = "unshard", unit
        for c in chain:
            if c.what in ("forward_prefetch", "backward_prefetch"):
                via = c.what
                outer = [d for d in chain if d.what in ("pre_forward", "pre_backward")]
                by = outer[0].unit if outer else _owner(c, fwd_lists, bwd_lists)
                break
        if "root_post_backward_callback" in whats:
            via = "callback"
            deferred.add(unit)
        elif launch.kind is not CollectiveKind.ALL_GATHER:
            via = "post_backward"
        comms.append((launch, unit, phase, via, by))
    for l in labels:
        inside = _children(l)
        if l.what == "all_gather":
            copy_in = [e for e in inside if e.name == "fsdp::all_gather_copy_in"]
            numels = _dims0(copy_in[0]) if copy_in else None
            layout = layouts.setdefault(l.unit, [None, None])
            if numels is not None and layout[0] is None:  # the first: on the shard group
                layout[0] = tuple(_numel(d) for d in numels)
        elif l.what == "post_backward_reduce":
            cat = [e for e in inside if e.name == "fsdp::chunk_cat"]
            shapes = _dims0(cat[0]) if cat else None
            if shapes is not None:
                layouts.setdefault(l.unit, [None, None])[1] = tuple(tuple(d) for d in shapes)
    _check_pairs(path, labels, comms, world)
    gradient_unit = _innermost(windows, [thread.events[i].ts for thread, i in grads])
    return Attribution("fsdp2", marks, hooks, comms, units,
                       {u: tuple(v) for u, v in fwd_lists.items()},
                       {u: tuple(v) for u, v in bwd_lists.items()},
                       {u: (v[0], v[1]) for u, v in layouts.items()}, gradient_unit, deferred)


def _innermost(windows: dict[str, list[float]], times: list[float]) -> dict[int, str]:
    """Each time's unit: the latest-starting backward window holding it (the root's when
    none does), by one sweep over the windows and times in order."""
    points = [(w[0], 0, u) for u, w in windows.items()] + \
        [(t, 1, k) for k, t in enumerate(times)]
    points.sort(key=lambda p: (p[0], p[1]))
    ends = {u: w[1] for u, w in windows.items()}
    active: list[str] = []
    out: dict[int, str] = {}
    for t, what, item in points:
        if what == 0:
            active.append(item)
            continue
        while active and ends[active[-1]] < t:
            active.pop()
        live = [u for u in active if ends[u] >= t]
        out[item] = live[-1] if live else ROOT
    return out


def unsharded_elements(launch, world: int) -> Optional[int]:
    """The unsharded count of an FSDP collective: an all-gather's output (gloo's
    ``c10d::_allgather_base_``: its first argument, ``out_elements``; NCCL's ``record_param_comms``: ``Out msg
    nelems``, else ``In msg nelems`` x ``Group size``; FSDP1's list form on CPU,
    ``c10d::allgather_``, records only the input: x ``world``), a reduce-scatter's input,
    an all-reduce's tensor."""
    args = launch.event.args or {}
    if launch.kind is not CollectiveKind.ALL_GATHER:
        return launch.elements
    if "Collective name" in args:
        out = args.get("Out msg nelems")
        if isinstance(out, int) and out > 0:
            return out
        group = args.get("Group size")
        n = args.get("In msg nelems")
        return n * group if isinstance(n, int) and isinstance(group, int) else None
    if launch.event.name == "c10d::allgather_":
        dims = args.get("Input Dims")
        if isinstance(dims, list) and len(dims) > 1 and isinstance(dims[1], list) and dims[1] \
                and isinstance(dims[1][0], list):
            return _numel(dims[1][0]) * world
        return launch.elements * world if launch.elements is not None else None
    if launch.out_elements is not None:  # c10d::_allgather_base_(output, input)
        return launch.out_elements
    return launch.elements * world if launch.elements is not None else None


def _nested(label: Label, of: dict) -> bool:
    """Whether an FSDP label sits inside another."""
    return any((id(label.thread), j) in of for j in _ancestors(label.thread, label.i))


def _owner(label: Label, fwd_lists: dict, bwd_lists: dict) -> str:
    lists = fwd_lists if label.what == "forward_prefetch" else bwd_lists
    for owner, targets in lists.items():
        if label.unit in targets:
            return owner
    return label.unit


def _place(launch, of: dict) -> Optional[tuple[str, list[Label]]]:
    """The unit of a collective (its innermost all-gather or reduce label) and its chain of
    FSDP labels, innermost first; ``None`` outside FSDP's labels."""
    chain = [of[(id(launch.thread), j)] for j in _ancestors(launch.thread, launch.i)
             if (id(launch.thread), j) in of]
    for c in chain:
        if c.what in ("all_gather", "post_backward_reduce"):
            return c.unit, chain
    return None


def _children(label: Label) -> list:
    thread, i = label.thread, label.i
    end = label.event.ts + label.event.dur
    out = []
    for j in range(i + 1, len(thread.events)):
        e = thread.events[j]
        if e.ts >= end:
            break
        out.append(e)
    return out


def _dims0(event) -> Optional[list]:
    """The first ``Input Dims`` entry of an op whose first argument is a tensor list."""
    dims = (event.args or {}).get("Input Dims")
    if isinstance(dims, list) and dims and isinstance(dims[0], list) \
            and all(isinstance(d, list) for d in dims[0]):
        return dims[0]
    return None


def _numel(shape: list) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _check_pairs(path: str, labels: list[Label], comms: list, world: int) -> None:
    """Every ``FSDP::all_gather`` label holds one all-gather; every
    ``FSDP::post_backward_reduce`` a reduce-scatter or an all-reduce (on more than one
    rank: FSDP copies instead on one, ``_fsdp_collectives.py:625-631``)."""
    held: dict[int, list] = defaultdict(list)
    for launch, *_ in comms:
        for j in _ancestors(launch.thread, launch.i):
            held[id(launch.thread.events[j])].append(launch.kind)
    for l in labels:
        kinds = held.get(id(l.event), [])
        if l.what == "all_gather" and kinds.count(CollectiveKind.ALL_GATHER) != 1:
            raise TraceFormatError(
                f"the FSDP label {l.event.name!r} holds {kinds.count(CollectiveKind.ALL_GATHER)} "
                "all-gathers, not one: its labels do not pair with its collectives (a trace "
                "cut short, or edited?); profile whole steps with record_shapes=True",
                path=path, line=l.event.line)
        if l.what == "post_backward_reduce" and not kinds and world > 1:
            raise TraceFormatError(
                f"the FSDP label {l.event.name!r} holds no reduce-scatter or all-reduce: its "
                "labels do not pair with its collectives (a trace cut short, or edited?)",
                path=path, line=l.event.line)
