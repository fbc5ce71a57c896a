"""Naming a profiler trace's gradients from what the trace itself records: module scopes.

What torch 2.13's profiler records that can name a gradient, and what it does not (sources
as docs/inputs.md cites them):

- With ``with_stack=True`` the Python tracer records each call of an ``nn.Module`` as a
  ``python_function`` event named ``nn.Module: <class>_<N>``: the class's ``__name__`` and
  N, the how-many-th instance of that class the profile saw (``NNModuleInfo::id_``). The
  module's attribute path (``layer1.0.conv1``) is not recorded, nor the names of its
  parameters: the tracer holds them in memory but the Chrome export writes only the name,
  ``Python id``, ``Python parent id`` and ``Python module id``. ``with_modules=True`` adds
  nothing for eager models (it fills ``Module Hierarchy`` for TorchScript only).
- No event carries a parameter's name: ``torch::autograd::AccumulateGrad`` records its
  gradient's shape and dtype; ``record_param_comms`` and ``c10d::*`` record the process
  group, the collective and its flat bucket's sizes; DDP's reducer events
  (``mul_out``, ``copy_bucket_to_grad``) record shapes only.

The rule, for each gradient (an ``AccumulateGrad``, in ready order):

1. the backward op that readied it is the last backward op its thread ran before it:
   autograd's ready queue runs ``AccumulateGrad`` nodes before any other (their sequence
   number is the largest), so the gradients a backward op makes ready run right after it;
   a gradient accumulated inside another backward op (a reentrant backward:
   ``torch.utils.checkpoint(..., use_reentrant=True)``, ``torch.autograd.grad`` in a custom
   backward) has none: what ran before it belongs to the outer graph, and the inner
   graph's leaves include activations (the checkpoint's detached inputs);
2. that backward op's forward op is the one its ``fwdbwd`` flow starts in (the outermost
   host op of the forward holding the flow's start);
3. the module is the innermost ``nn.Module`` scope holding that forward op on its thread,
   and its path the scopes holding it, outermost first: ``Sequential_0/Block_0/Conv2d_1``;
4. where that module is a torch.nn layer :mod:`.kineto_roles` lists, the forward op is that
   layer's operator run by torch's own ``forward`` of the layer (the Python tracer's frame
   ``torch/nn/modules/conv.py(N): forward`` inside the scope: not a user's class of the same
   name), and exactly one of its arguments has the gradient's shape and dtype, the
   argument says which parameter it is: ``Sequential_0/Block_0/Conv2d_1.weight``;
   else the name is the path and the positional name: ``Sequential_0/Block_0/BatchNorm2d_1:grad5[8]``;
5. the scopes that hold every named gradient's module (DDP's wrapper, the model itself) are
   left out of the names; two gradients that would get one name both keep path and position.

A gradient for which a step finds nothing keeps its positional name (``grad17[64,32,3,3]``):
a name is never invented. Limits: a parameter several modules share (tied embeddings) is
named after the use whose backward readied it, the last one backward reached (the first in
forward), and one a module uses without holding it (``F.linear(x, self.other.weight)``,
``weight_norm``'s ``_WeightNorm``, given its tensors as arguments) is put under that
module: the trace tells use from ownership nowhere; a module class is known only by its
``__name__`` (two classes of one name, a user's ``Linear`` and torch's, count apart, so
both have a ``Linear_0``; clashing names fall back as in step 5); non-reentrant activation
checkpointing keeps the names (backward's nodes are the forward's), reentrant
checkpointing leaves its gradients positional (step 1).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from typing import Any, Optional, Sequence

from ..errors import TraceFormatError, excerpt
from ..model import Op, Tensor
from .kineto_events import MODULE_PREFIX, Event, torch_dtype
from .kineto_roles import LAYER_FILES, LAYER_OPS, layer_file
from .kineto_threads import ACCUMULATE, EVALUATE, Thread, ancestor_indices

__all__ = ["Scopes", "module_scopes", "name_by_modules"]

_NAME = re.compile(r"(\w+)_(\d+)")
MAX_CLASS_NAME = 200
MAX_INSTANCE_DIGITS = 9  # fewer than a billion instances of one class


def _scope_name(e: Event, path: str) -> str:
    """``Class_N`` of an ``nn.Module: Class_N`` event, checked."""
    text = e.name[len(MODULE_PREFIX):]
    m = _NAME.fullmatch(text)
    if m is None or not m[1].isidentifier() or len(m[1]) > MAX_CLASS_NAME:
        raise TraceFormatError(f"module scope {excerpt(repr(e.name))} is not 'nn.Module: Class_N' "
                               "(a class name and its instance number), as torch's profiler "
                               "writes it; was the trace edited?", path=path, line=e.line)
    if len(m[2]) > MAX_INSTANCE_DIGITS:
        raise TraceFormatError(f"module scope {excerpt(repr(e.name))} numbers more than a "
                               "billion instances of one class; the trace is corrupt", path=path, line=e.line)
    return text


class Scopes:
    """One thread's module scopes, nested by time as the Python tracer recorded them, and
    its frames of torch's layers' ``forward`` (``frames``)."""

    def __init__(self, events: list[Event], path: str, frames: Sequence[Event] = ()):
        self._frames = sorted(frames, key=lambda e: (e.ts, -e.dur, e.line))
        self._frame_starts = [e.ts for e in self._frames]
        self._thread = Thread(events)
        self._names = [_scope_name(e, path) for e in self._thread.events]
        for i, e in enumerate(self._thread.events):
            p = self._thread.parent[i]
            if p >= 0 and e.end > self._thread.events[p].end:
                raise TraceFormatError(f"module scope {excerpt(e.name)} ends after the scope "
                                       f"{excerpt(self._thread.events[p].name)} it starts in; "
                                       "calls nest, so the trace is corrupt", path=path, line=e.line)

    def _innermost(self, event: Event) -> int:
        events, parent = self._thread.events, self._thread.parent
        i = bisect.bisect_right(self._thread.starts, event.ts) - 1
        while i >= 0 and events[i].end < event.end:
            i = parent[i]
        return i

    def layer_file(self, event: Event) -> Optional[str]:
        """The file of torch's layer ``forward`` that runs ``event`` inside the innermost
        scope holding it (:func:`.kineto_roles.layer_file`), else ``None``."""
        i = self._innermost(event)
        if i < 0:
            return None
        scope = self._thread.events[i]
        k = bisect.bisect_right(self._frame_starts, event.ts) - 1
        while k >= 0 and self._frames[k].ts >= scope.ts:
            if self._frames[k].end >= event.end:
                return layer_file(self._frames[k].name)
            k -= 1
        return None

    def path(self, event: Event) -> list[str]:
        """The scopes holding ``event``, outermost first (empty: none)."""
        parent = self._thread.parent
        i = self._innermost(event)
        chain = []
        while i >= 0:
            chain.append(self._names[i])
            i = parent[i]
        return chain[::-1]


def module_scopes(events: Sequence[Event], path: str, frames: Sequence[Event] = ()) -> dict[Any, Scopes]:
    """Each thread's :class:`Scopes` (empty when the trace has none: no ``with_stack``);
    ``frames``: the Python tracer's frames of torch's layers' ``forward``."""
    by_tid: dict[Any, list[Event]] = {}
    for e in events:
        by_tid.setdefault(e.tid, []).append(e)
    frames_of: dict[Any, list[Event]] = {}
    for e in frames:
        frames_of.setdefault(e.tid, []).append(e)
    return {tid: Scopes(list(evs), path, frames_of.get(tid, ())) for tid, evs in by_tid.items()}


def _top_backward(thread: Thread) -> list[int]:
    """Indices of the thread's backward ops that no other backward op holds."""
    return [i for i, e in enumerate(thread.events) if e.name.startswith(EVALUATE)
            and not any(a.name.startswith(EVALUATE) for a in thread.ancestors(i))]


def _readied_by(thread: Thread, i: int, tops: list[int]) -> Optional[int]:
    """Rule step 1: the backward op the thread ran last before gradient event ``i``;
    ``None`` where the gradient was accumulated inside another backward op (a reentrant
    backward: its leaves may be activations, and what ran before it is the outer graph's)."""
    evaluating = [j for j in (i, *ancestor_indices(thread, i)) if thread.events[j].name.startswith(EVALUATE)]
    if len(evaluating) > 1:
        return None
    top = evaluating[0] if evaluating else i
    k = bisect.bisect_left(tops, top) - 1
    while k >= 0 and thread.events[tops[k]].name.endswith(ACCUMULATE):
        k -= 1
    return tops[k] if k >= 0 else None


def _role(scope: str, forward: Event, t: Tensor, frame: Optional[str]) -> Optional[str]:
    """Rule step 4: the parameter of layer ``scope`` whose gradient ``t`` is, if provable;
    ``frame``: the file of torch's layer ``forward`` running ``forward`` in that scope."""
    cls = scope.rsplit("_", 1)[0]
    layer = LAYER_OPS.get(cls)
    if layer is None or forward.name != layer[0] or t.shape is None or t.dtype is None \
            or frame != LAYER_FILES[cls]:
        return None
    args = forward.args or {}
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return None
    hits = [j for j, (d, ty) in enumerate(zip(dims, types))
            if d == list(t.shape) and torch_dtype(ty) == t.dtype]
    return layer[1].get(hits[0]) if len(hits) == 1 else None


def name_by_modules(tensors: list[Tensor], grads: Sequence[tuple[Thread, int]], ops: list[Op],
                    where: dict, threads: dict[Any, Thread],
                    scopes: dict[Any, Scopes]) -> tuple[list[Tensor], Optional[str]]:
    """Names and layers of ``tensors`` (gradient ``k`` accumulated by ``grads[k]``) by the
    module's rule; ``where``: (id(thread), index) -> op id of the step's ops (of
    ``threads``), whose backward ops carry their forward ``partner``. Returns the tensors
    and what was done (``None``: the trace records no module scopes)."""
    if not scopes or not tensors:
        return tensors, None
    by_id = {op.id: op for op in ops}
    event_of = {op_id: place for place, op_id in where.items()}
    thread_of = {id(t): t for t in threads.values()}
    tops: dict[int, list[int]] = {}
    found: dict[int, tuple[list[str], Optional[str]]] = {}
    for k, (thread, i) in enumerate(grads):
        if id(thread) not in tops:
            tops[id(thread)] = _top_backward(thread)
        b = _readied_by(thread, i, tops[id(thread)])
        op = by_id.get(where.get((id(thread), b))) if b is not None else None
        place = event_of.get(op.partner) if op is not None and op.partner else None
        if place is None:
            continue
        forward = thread_of[place[0]].events[place[1]]
        scope = scopes.get(forward.tid)
        chain = scope.path(forward) if scope is not None else []
        if chain:
            found[k] = (chain, _role(chain[-1], forward, tensors[k], scope.layer_file(forward)))
    return _names(tensors, found)


def _names(tensors: list[Tensor], found: dict) -> tuple[list[Tensor], Optional[str]]:
    """Rule step 5, and the note."""
    if not found:
        return tensors, ("names: position and shape (no module scope of the trace holds the "
                         "forward op of a backward op that readied a gradient); pass the "
                         "parameter sidecar with --sizes FILE (docs/inputs.md) for the model's "
                         "own names")
    parents = [chain[:-1] for chain, _ in found.values()]
    common = 0
    while all(len(p) > common and p[common] == parents[0][common] for p in parents):
        common += 1
    named = list(tensors)
    full = {k: (f"{'/'.join(chain[common:])}.{role}" if role else None) for k, (chain, role) in found.items()}
    clash = {n for n, c in Counter(full.values()).items() if n is not None and c > 1}
    roles = 0
    for k, (chain, role) in found.items():
        layer = "/".join(chain[common:])
        name = full[k] if full[k] is not None and full[k] not in clash else f"{layer}:{tensors[k].name}"
        roles += name == full[k]
        named[k] = tensors[k]._replace(name=name, layer=layer)
    example = next((named[k].name for k in found if named[k].name == full[k]), named[next(iter(found))].name)
    note = (f"names from the trace's module scopes (with_stack=True): {roles} of {len(tensors)} "
            f"gradients by module and parameter, {len(found) - roles} by module and position, "
            f"{len(tensors) - len(found)} by position (e.g. {example}; docs/inputs.md says the rule)")
    return named, note
