"""The ``inspect --json`` rows: one field list per row kind, encoded two ways.

:data:`GRADIENT_FIELDS` and :data:`LAYER_FIELDS` say each row's keys, in order, where each
value comes from and what type it has. :func:`gradient_dicts` and :func:`layer_dicts` build
the rows as dicts from them (what ``jsonout.dumps`` encodes); :func:`gradient_rows` and
:func:`layer_rows` write the same text straight from the records, a column at a time.

A 500,000-line op list has 66,000 gradients and 33,000 layers: building a dict a row and
encoding it takes half a second; encoding each column with the encoder of its type takes a
fifth of that. The text is exactly what ``jsonout.dumps`` makes of the dicts (tested against
dicts built independently, on every sample and on records with awkward values); where a value
is not of the plain type its field declares (a bool among ints, a NaN, another key), the
text functions return ``None`` and the dicts are encoded instead.
"""

from __future__ import annotations

import json.encoder
import math
from operator import attrgetter
from typing import Any, Callable, NamedTuple, Optional

from ..analysis import Readiness

__all__ = ["Encoded", "Field", "GRADIENT_FIELDS", "LAYER_FIELDS", "gradient_dicts", "layer_dicts",
           "gradient_rows", "layer_rows"]

_string = json.encoder.encode_basestring  # what the C encoder writes for a str (no ASCII escaping)


class Encoded(list):
    """Rows already encoded as JSON text, one string a row."""


class _Type(NamedTuple):
    """A field's value type: the Python types it may hold (and, for a sequence, its items
    may hold) and its JSON text."""

    types: frozenset
    encode: Callable[[Any], str]
    items: Optional[frozenset] = None

    def holds(self, values: list) -> bool:
        if not self.types.issuperset(map(type, values)):
            return False
        return self.items is None or all(self.items.issuperset(map(type, v)) for v in values if v)


def _optional(encode: Callable[[Any], str]) -> Callable[[Any], str]:
    def text(v):
        return "null" if v is None else encode(v)
    text.column = lambda values: ["null" if v is None else encode(v) for v in values]
    return text


def _ints(values) -> str:
    return "[" + ", ".join(map(int.__repr__, values)) + "]"


STR = _Type(frozenset({str}), _string)
OPTIONAL_STR = _Type(frozenset({str, type(None)}), _optional(_string))
INT = _Type(frozenset({int}), int.__repr__)
OPTIONAL_INT = _Type(frozenset({int, type(None)}), _optional(int.__repr__))
BOOL = _Type(frozenset({bool}), {True: "true", False: "false"}.__getitem__)
SHAPE = _Type(frozenset({tuple, list, type(None)}), _optional(_ints), frozenset({int}))
NAMES = _Type(frozenset({tuple, list}), lambda v: "[" + ", ".join(map(_string, v)) + "]",
              frozenset({str}))
_OPTIONAL_NUMBER = frozenset({int, float, type(None)})


class Field(NamedTuple):
    key: str
    get: Callable[[Any], Any]  # the value of a record
    type: _Type
    plain: Callable[[Any], Any] = lambda v: v  # the value as a dict row holds it


GRADIENT_FIELDS = (
    Field("name", attrgetter("name"), STR),
    Field("layer", attrgetter("layer"), OPTIONAL_STR),
    Field("bytes", attrgetter("nbytes"), OPTIONAL_INT),
    Field("ready_index", attrgetter("ready_index"), INT),
    Field("elements", attrgetter("elements"), OPTIONAL_INT),
    Field("dtype", attrgetter("dtype"), OPTIONAL_STR),
    Field("shape", attrgetter("shape"), SHAPE, lambda v: None if v is None else list(v)),
    Field("backward_position", attrgetter("backward_position"), INT),
    Field("ready_source", attrgetter("source"), STR),
    Field("ready_op", attrgetter("op_name"), OPTIONAL_STR),
    Field("sparse", attrgetter("sparse"), BOOL),
)
"""A gradient row; the CLI may add ``shape`` and ``ready_ms`` (a key given twice keeps its
first place)."""

LAYER_FIELDS = (
    Field("name", attrgetter("name"), STR),
    Field("params", attrgetter("elements"), OPTIONAL_INT),
    Field("bytes", attrgetter("nbytes"), OPTIONAL_INT),
    Field("ready_index", attrgetter("ready_index"), INT),
    Field("backward_position", attrgetter("backward_position"), INT),
    Field("tensors", attrgetter("tensors"), NAMES, list),
)
"""A layer row, then ``cumulative_bytes`` (``null`` from the first layer of unknown size on)."""

_EXTRA = ("shape", "ready_ms")  # what the CLI adds to a gradient row


def gradient_dicts(ready: Readiness, extra: dict) -> list[dict]:
    return [{**{f.key: f.plain(f.get(g)) for f in GRADIENT_FIELDS}, **extra.get(g.tensor_id, {})}
            for g in ready.gradients]


def _cumulative(layers) -> list[Optional[int]]:
    out, total = [], 0
    for layer in layers:
        total = total + layer.nbytes if layer.nbytes is not None and total is not None else None
        out.append(total)
    return out


def layer_dicts(ready: Readiness) -> list[dict]:
    return [{**{f.key: f.plain(f.get(layer)) for f in LAYER_FIELDS}, "cumulative_bytes": c}
            for layer, c in zip(ready.layers, _cumulative(ready.layers))]


def _encoded_columns(records, fields, given: Optional[dict] = None) -> Optional[list[list[str]]]:
    """Each field's column of value texts (``given``: a field's values, by key, where they
    come from elsewhere), or ``None`` if a value is not of its field's type."""
    columns = []
    for f in fields:
        values = given[f.key] if given and f.key in given else list(map(f.get, records))
        if not f.type.holds(values):
            return None
        encode = f.type.encode
        columns.append(encode.column(values) if hasattr(encode, "column") else list(map(encode, values)))
    return columns


def _rows(keys: list[str], columns: list[list[str]]) -> Encoded:
    """One row a record: each key with its column's text (keys hold no braces)."""
    template = "{{" + ", ".join(_string(k) + ": {}" for k in keys) + "}}"
    return Encoded(map(template.format, *columns))


def gradient_rows(ready: Readiness, extra: dict) -> Optional[Encoded]:
    """The document's gradient rows as text; ``extra`` holds, per gradient, nothing or
    exactly ``shape`` and ``ready_ms`` (what the CLI adds: its shape replaces the record's)."""
    grads = ready.gradients
    if not grads:
        return Encoded()
    given, times = None, None
    if extra:
        more = [extra.get(g.tensor_id) for g in grads]
        if any(m is None or list(m) != list(_EXTRA) for m in more):
            return None
        given = {"shape": [m["shape"] for m in more]}
        times = [m["ready_ms"] for m in more]
        if not _OPTIONAL_NUMBER.issuperset(map(type, times)) or not all(
                math.isfinite(t) for t in times if t is not None):
            return None
    columns = _encoded_columns(grads, GRADIENT_FIELDS, given)
    if columns is None:
        return None
    keys = [f.key for f in GRADIENT_FIELDS]
    if times is not None:
        keys.append("ready_ms")
        columns.append(["null" if t is None else t.__repr__() for t in times])
    return _rows(keys, columns)


def layer_rows(ready: Readiness) -> Optional[Encoded]:
    """The document's layer rows as text."""
    layers = ready.layers
    if not layers:
        return Encoded()
    columns = _encoded_columns(layers, LAYER_FIELDS)
    if columns is None:
        return None
    columns.append(["null" if c is None else int.__repr__(c) for c in _cumulative(layers)])
    return _rows([f.key for f in LAYER_FIELDS] + ["cumulative_bytes"], columns)
