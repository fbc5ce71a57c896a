"""The ``inspect --json`` rows as JSON text, one f-string a row.

A 500,000-line op list has 66,000 gradients and 33,000 layers: building a dict a row and
encoding it takes half a second; writing each row's text from its record directly takes a
fifth of that. The text is exactly what ``jsonout.dumps`` makes of the document's dicts
(tested against dicts built independently, on every sample and on records with awkward
values); where a value is not of the plain type a template assumes (a bool among ints, a
NaN, another key), these return ``None`` and the dicts are encoded instead.
"""

from __future__ import annotations

import json.encoder
import math
from itertools import chain, repeat
from operator import attrgetter
from typing import Optional

from ..analysis import Readiness

__all__ = ["Encoded", "gradient_rows", "layer_rows"]

_string = json.encoder.encode_basestring  # what the C encoder writes for a str (no ASCII escaping)
_INT = frozenset({int})
_STR = frozenset({str})
_OPTIONAL_INT = frozenset({int, type(None)})
_OPTIONAL_STR = frozenset({str, type(None)})
_OPTIONAL_NUMBER = frozenset({int, float, type(None)})
_BOOL = frozenset({bool})
_SEQUENCE = frozenset({tuple, list, type(None)})


class Encoded(list):
    """Rows already encoded as JSON text, one string a row."""


def _all(values, types: frozenset) -> bool:
    return types.issuperset(map(type, values))


def _columns(records, checks) -> bool:
    """Every record's field of each ``(name, types)`` check is of one of those types."""
    return all(types.issuperset(map(type, map(attrgetter(name), records)))
               for name, types in checks)


def gradient_rows(ready: Readiness, extra: dict) -> Optional[Encoded]:
    """The document's gradient rows as text; ``extra`` holds, per gradient, nothing or
    exactly ``shape`` and ``ready_ms`` (what the CLI adds)."""
    grads = ready.gradients
    if not _columns(grads, _GRADIENT_CHECKS):
        return None
    if extra:
        more = list(map(extra.get, map(attrgetter("tensor_id"), grads)))
        if None in more or not all(map(_SHAPE_AND_TIME.__eq__, map(list, more))):
            return None
        shapes = list(map(dict.__getitem__, more, repeat("shape")))
        times = list(map(dict.__getitem__, more, repeat("ready_ms")))
        if not _all(times, _OPTIONAL_NUMBER) or not all(
                math.isfinite(t) for t in times if t is not None):
            return None
    else:
        shapes = list(map(attrgetter("shape"), grads))
        times = [_NO_TIME] * len(grads)
    if not _all(shapes, _SEQUENCE) or not _all(chain.from_iterable(filter(None, shapes)), _INT):
        return None
    string, ints, null = _string, int.__repr__, "null"  # the checks above make these exact
    return Encoded(
        f'{{"name": {string(g.name)}, '
        f'"layer": {null if g.layer is None else string(g.layer)}, '
        f'"bytes": {null if g.nbytes is None else g.nbytes}, "ready_index": {g.ready_index}, '
        f'"elements": {null if g.elements is None else g.elements}, '
        f'"dtype": {null if g.dtype is None else string(g.dtype)}, '
        f'"shape": {null if shape is None else "[" + ", ".join(map(ints, shape)) + "]"}, '
        f'"backward_position": {g.backward_position}, "ready_source": {string(g.source)}, '
        f'"ready_op": {null if g.op_name is None else string(g.op_name)}, '
        f'"sparse": {"true" if g.sparse else "false"}'
        f'{"}" if t is _NO_TIME else ", " + _READY_MS + (null if t is None else t.__repr__()) + "}"}'
        for g, shape, t in zip(grads, shapes, times))


_GRADIENT_CHECKS = (("name", _STR), ("layer", _OPTIONAL_STR), ("nbytes", _OPTIONAL_INT),
                    ("ready_index", _INT), ("elements", _OPTIONAL_INT), ("dtype", _OPTIONAL_STR),
                    ("backward_position", _INT), ("source", _STR), ("op_name", _OPTIONAL_STR),
                    ("sparse", _BOOL))
_SHAPE_AND_TIME = ["shape", "ready_ms"]
_NO_TIME = object()  # no ready_ms key (no extra fields given)
_READY_MS = '"ready_ms": '


def layer_rows(ready: Readiness) -> Optional[Encoded]:
    """The document's layer rows as text (cumulative bytes: ``null`` from the first
    layer of unknown size on)."""
    layers = ready.layers
    if not _columns(layers, _LAYER_CHECKS) or not all(_all(l.tensors, _STR) for l in layers):
        return None
    rows = Encoded()
    cumulative: Optional[int] = 0
    for l in layers:
        cumulative = cumulative + l.nbytes if l.nbytes is not None and cumulative is not None \
            else None
        rows.append(
            f'{{"name": {_string(l.name)}, "params": {"null" if l.elements is None else l.elements}, '
            f'"bytes": {"null" if l.nbytes is None else l.nbytes}, "ready_index": {l.ready_index}, '
            f'"backward_position": {l.backward_position}, '
            f'"tensors": [{", ".join(map(_string, l.tensors))}], '
            f'"cumulative_bytes": {"null" if cumulative is None else cumulative}}}')
    return rows


_LAYER_CHECKS = (("name", _STR), ("elements", _OPTIONAL_INT), ("nbytes", _OPTIONAL_INT),
                 ("ready_index", _INT), ("backward_position", _INT))
