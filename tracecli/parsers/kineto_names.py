"""Naming a profiler trace's gradients from a parameter sidecar.

A profiler trace records each gradient's shape and dtype (``record_shapes=True``) and when
it became ready, not which parameter it belongs to; the sidecar lists the parameters in
``named_parameters()`` order with their shapes, dtypes and marks
(:class:`~tracecli.model.ParamMeta`). Gradients and parameters are matched within each
(shape, dtype):

- one gradient and one parameter: they are each other's (``unique``);
- as many gradients as parameters, several of each: by order (``by order``), from what
  the trace itself shows. The gradients one backward op readies (consecutive
  ``AccumulateGrad`` events with no other backward op between them: a LayerNorm's weight
  and bias, Megatron's Linear's weight and bias) belong to one module, and come in that
  module's own order (autograd pushes a node's next edges in input order). Backward runs
  modules in the reverse of forward, which follows ``named_parameters()`` (what
  Megatron-Core assumes, "to roughly follow backprop order"). So, backward ops latest
  first, each op's gradients go to the first module (by the parameters' names, in
  ``named_parameters()`` order) that still holds unassigned parameters of all their shapes
  and dtypes, in its order. A module registered before the one its forward uses first
  (``nn.TransformerEncoderLayer``'s ``linear2`` before ``norm1``) is found by its shapes;
  a parent module's own parameters (a model's ``temperature``, listed before its
  children's) come last, since where its forward uses them is unknown.
- counts that differ (a frozen or unused parameter of that shape, or another model's
  sidecar): which parameters these gradients are is truly ambiguous; they keep positional
  names, and the note says which (shape, dtype) and how many of each.

A mark is never dropped silently: where gradients stay unnamed and the parameters they
may be carry different marks, or the trace records no shapes to match by and the sidecar
carries marks, :func:`name_gradients` raises a :class:`SizesError` saying which.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Optional, Sequence

from ..errors import SizesError
from ..model import DTYPE_BYTES, NO_META, Tensor
from .sizes import line_of

__all__ = ["name_gradients"]


def _sig(shape, dtype) -> str:
    return f"[{','.join(map(str, shape or ()))}] {dtype}"


def _line(sizes_path: str, v) -> int:
    return v.line or line_of(sizes_path, v.index)


def _marked(variables: Sequence) -> list:
    return [v for v in variables if v.meta is not NO_META]


def _marks_text(v) -> str:
    return ", ".join(f"{k}={value}" for k, value in v.meta.to_json().items())


def _named(t: Tensor, v) -> Tensor:
    layer = v.name.rsplit(".", 1)[0] if "." in v.name else None
    return t._replace(name=v.name, layer=layer, index=v.index, meta=v.meta)


def _module(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def _clusters(members: list[int], ops: Optional[Sequence[int]]) -> list[list[int]]:
    """The gradients of ``members`` in the sidecar's order by the module rule (module
    docstring), in clusters: those one backward op readied, the latest op first, each in
    the order it readied them. ``ops[k]``: how many other backward ops ran before gradient
    ``k``; without it, each gradient alone, the last ready first."""
    if ops is None:
        return [[k] for k in reversed(members)]
    by_op: dict[int, list[int]] = defaultdict(list)
    for k in members:
        by_op[ops[k]].append(k)
    return [by_op[o] for o in sorted(by_op, reverse=True)]


def _assign(tensors: list[Tensor], balanced: list[int], candidates: dict, ops) -> dict[int, object]:
    """Gradient -> parameter for the gradients of ``balanced`` (their (shape, dtype) has as
    many parameters in ``candidates``): each cluster of gradients one backward op readied
    takes the first module (in ``named_parameters()`` order, a parent module's own
    parameters after those of modules without children) holding unassigned parameters of
    all its shapes and dtypes, a module's parameters taken in its order; a cluster no one
    module holds takes the first unassigned parameters of each (shape, dtype)."""
    modules: dict[str, dict[tuple, list]] = {}
    where: dict[tuple, list[str]] = defaultdict(list)  # (shape, dtype) -> modules holding it
    for v, sig in sorted(((v, sig) for sig, params in candidates.items() for v in params),
                         key=lambda vs: vs[0].index):  # named_parameters() order
        mod = modules.setdefault(_module(v.name), {})
        if sig not in mod:
            where[sig].append(_module(v.name))
        mod.setdefault(sig, []).append(v)
    parents = _parents(modules)
    if parents:  # a parent module's own parameters last: where its forward uses them is unknown
        for sig, names in where.items():
            names.sort(key=lambda m: m in parents)  # stable: named_parameters() order otherwise
    start: dict[tuple, int] = defaultdict(int)  # the first module that may still hold it
    taken: dict[int, object] = {}
    for cluster in _clusters(balanced, ops):
        need: dict[tuple, int] = defaultdict(int)
        for k in cluster:
            need[(tensors[k].shape, tensors[k].dtype)] += 1
        rare = min(need, key=lambda s: len(where[s]))
        names = where[rare]
        while start[rare] < len(names) and not modules[names[start[rare]]][rare]:
            start[rare] += 1
        home = next((modules[names[j]] for j in range(start[rare], len(names))
                     if all(len(modules[names[j]].get(s, ())) >= c for s, c in need.items())), None)
        for k in cluster:
            sig = (tensors[k].shape, tensors[k].dtype)
            pool = home[sig] if home is not None else _first_holding(modules, where[sig], sig)
            taken[k] = pool.pop(0)
    return taken


def _parents(modules) -> set[str]:
    """The modules with modules of their own in the sidecar (``""``: the model itself)."""
    found = set()
    for name in modules:
        parts = name.split(".") if name else []
        found.update(".".join(parts[:i]) for i in range(len(parts)))
    return found & set(modules)


def _first_holding(modules: dict, names: list[str], sig: tuple) -> list:
    return next(modules[m][sig] for m in names if modules[m][sig])


def name_gradients(tensors: list[Tensor], variables: Sequence, sizes_path: str,
                   ops: Optional[Sequence[int]] = None, trace_path: str = "",
                   units: bool = False) -> tuple[list[Tensor], str]:
    """Names, places and marks from a parameter sidecar (``named_parameters()`` order), as
    the module's docstring says; ``ops[k]``: the backward ops run before gradient ``k``
    became ready (its readying op's place). ``units``: an FSDP run, whose gradients (flat
    parameters, low-precision ones) may match no parameter: the sidecar names its units
    instead, so that is no error. Returns the tensors and what was done."""
    if tensors and all(t.shape is None for t in tensors):
        marked = _marked(variables)
        if marked:
            raise SizesError(f"marks {marked[0].name} ({_marks_text(marked[0])}) and "
                             f"{len(marked) - 1} more, but {trace_path or 'the trace'} records no "
                             "shapes to match its gradients to parameters by, so the marks cannot "
                             "be used; profile with record_shapes=True", path=sizes_path, line=_line(sizes_path, marked[0]))
        return tensors, (f"names from {sizes_path} not attached: the trace records no shapes "
                         "to match them by (profile with record_shapes=True)")
    by_sig: dict[tuple, list[int]] = defaultdict(list)
    for k, t in enumerate(tensors):
        by_sig[(t.shape, t.dtype)].append(k)
    side: dict[tuple, list] = defaultdict(list)
    for v in variables:
        side[(tuple(v.shape), v.dtype)].append(v)
    named = list(tensors)
    unique = by_order = 0
    unmatched, missing, balanced = [], [], []
    unknown = by_sig.pop((None, None), [])
    for sig, members in by_sig.items():
        candidates = side.get(sig, [])
        if len(members) == len(candidates):
            balanced.extend(members)
            unique += len(members) == 1
            by_order += len(members) if len(members) > 1 else 0
        elif candidates:
            _keep_marks(named, members, candidates, sig, sizes_path)
            unmatched.append((sig, len(members), len(candidates)))
        else:
            missing.append(sig)
    for k, v in _assign(tensors, sorted(balanced), {sig: side[sig] for sig in by_sig
                                                     if len(by_sig[sig]) == len(side.get(sig, ()))},
                        ops).items():
        named[k] = _named(tensors[k], v)
    if not unique and not by_order and any(t.shape is not None for t in tensors) and not units:
        raise SizesError(_none_named(trace_path, unmatched, missing), path=sizes_path, line=1)
    filled = _fill_unrecorded(named, unknown, by_sig, side, sizes_path) if unknown else ""
    return named, _note(sizes_path, len(tensors), unique, by_order, filled, unmatched, missing,
                        by_sig, len(variables))


def _keep_marks(named: list[Tensor], members: list[int], candidates: list, sig, sizes_path: str) -> None:
    """Unnamed gradients take the marks their candidate parameters share; marks that differ
    among them cannot be given to any: an error saying which."""
    metas = {v.meta for v in candidates}
    if len(metas) == 1:
        meta = metas.pop()
        for k in members:
            named[k] = named[k]._replace(meta=meta)
        return
    v = next(v for v in candidates if v.meta is not NO_META)
    raise SizesError(f"{len(candidates)} parameters of {_sig(*sig)} carry different marks (e.g. "
                     f"{v.name}: {_marks_text(v)}), but the trace has {len(members)} gradients of "
                     "that shape and dtype, so which parameters they are, and their marks, cannot "
                     "be told; pass a sidecar listing exactly the parameters that get gradients",
                     path=sizes_path, line=_line(sizes_path, v))


def _none_named(trace_path: str, unmatched: list, missing: list) -> str:
    """Why no gradient of the trace could be named: which shapes and dtypes disagree."""
    if unmatched:
        sig, n, m = max(unmatched, key=lambda u: u[1])
        return (f"no gradient of {trace_path or 'the trace'} could be given a parameter: its "
                f"shapes and dtypes come in other numbers than the sidecar's (e.g. {n} gradients "
                f"but {m} parameters of {_sig(*sig)}); pass the sidecar of this model, listing "
                "the parameters that get gradients, with --sizes")
    return (f"no parameter matches a gradient of {trace_path or 'the trace'} by shape and dtype "
            f"(e.g. {_sig(*missing[0])}); pass the sidecar of this model with --sizes")


def _note(sizes_path, total, unique, by_order, filled, unmatched, missing, by_sig, params) -> str:
    note = f"names from {sizes_path}: {unique + by_order} of {total} gradients"
    if by_order:
        note += (f" ({by_order} by order among parameters of one shape and dtype: the gradients "
                 "one backward op readied to one module, modules in the reverse of "
                 "named_parameters(), a module's own in its order)")
    note += filled
    if unmatched:
        sig, n, m = max(unmatched, key=lambda u: u[1])
        left = sum(n for _, n, _ in unmatched)
        note += (f"; {left} keep positional names: their shapes and dtypes come in other numbers "
                 f"than the sidecar's (e.g. {n} gradients and {m} parameters of {_sig(*sig)})")
    if missing:
        note += (f"; {sum(len(by_sig[s]) for s in missing)} match no parameter of the sidecar "
                 f"(e.g. {_sig(*missing[0])}): is it this model's?")
    if params > total:
        note += f"; {params - total} parameters of the sidecar have no gradient in this step (unused or frozen)"
    return note


def _fill_unrecorded(named: list[Tensor], unknown: list[int], by_sig: dict, side: dict,
                     sizes_path: str) -> str:
    """Gradients whose AccumulateGrad recorded no tensor take the sidecar's parameters that
    no recorded gradient accounts for, when those all have one shape and dtype (a name too
    when there is one of each); else they stay unknown. Returns what was done."""
    left = [v for sig, params in side.items() for v in params[len(by_sig.get(sig, ())):]]
    sigs = {(tuple(v.shape), v.dtype) for v in left}
    if len(left) != len(unknown) or len(sigs) != 1:
        return (f"; {len(unknown)} recorded no tensor and the sidecar leaves {len(left)} "
                "parameters no recorded gradient accounts for: their sizes stay unknown")
    if len(left) > 1:
        _keep_marks(named, unknown, left, sigs.pop(), sizes_path)
    for k, v in zip(unknown, left):
        t = named[k]
        nbytes = math.prod(v.shape) * DTYPE_BYTES[v.dtype] if v.dtype in DTYPE_BYTES else None
        if len(left) == 1:
            t = _named(t, v)
        named[k] = t._replace(shape=tuple(v.shape), dtype=v.dtype, nbytes=nbytes)
    v = left[0]
    return (f"; {len(unknown)} recorded no tensor and took the size of the sidecar's "
            f"{'only parameter' if len(left) == 1 else str(len(left)) + ' parameters'} no "
            f"recorded gradient accounts for ({v.name if len(left) == 1 else 'e.g. ' + v.name} "
            f"[{','.join(map(str, v.shape))}] {v.dtype})")
