"""The timing file (``--op-times``): measured ms of ops or layers, and of forward.

Two forms: flat, ``{OP_OR_LAYER: ms, ..., "forward_ms": ms}`` (a key names an op by its id
such as ``op12`` or by its name, or a layer: the layer's whole backward time), and
structured, ``{"ops": {OP: ms}, "layers": {LAYER: ms}, "forward_ms": ms}``. This module
reads and checks it; :func:`tracecli.analysis.compute.compute_profile` resolves the names
against a trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional

from ..errors import CalibrationError
from ..jsonfile import finite_number, read_json

__all__ = ["OpTimes", "load_op_times", "MAX_OP_MS"]

MAX_OP_MS = 1e7  # ~2.8 hours; no op of one step takes longer


class OpTimes(NamedTuple):
    """A timing file: ms per op (id or name) and per layer (its backward), and forward.

    ``names`` holds the keys of the flat form, resolved against a trace's ops and layers
    when the profile is made.
    """

    ops: dict[str, float]
    layers: dict[str, float]
    forward_ms: Optional[float]
    path: str
    names: dict[str, float] = {}


def load_op_times(path: str | Path) -> OpTimes:
    """A timing file, in either form:

    - flat: ``{OP_OR_LAYER: ms, ..., "forward_ms": ms}``; a key names an op (its id such as
      ``op12``, or its name) or a layer (the layer's whole backward time);
    - structured: ``{"ops": {OP: ms}, "layers": {LAYER: ms}, "forward_ms": ms}``.
    """
    path = str(path)
    doc = read_json(path, CalibrationError, "timing file")
    if not isinstance(doc, dict) or not doc:
        raise CalibrationError('expected a JSON object of op or layer -> ms, e.g. '
                               '{"op12": 0.8, "/predictor/fc6": 2.5, "forward_ms": 40}', path=path, line=1)

    def ms(value, what) -> float:
        if not finite_number(value) or not 0 <= value <= MAX_OP_MS:
            raise CalibrationError(f"{what} must be a number of ms from 0 to {MAX_OP_MS:g}", path=path, line=1)
        return float(value)

    forward = doc.get("forward_ms")
    forward = None if forward is None else ms(forward, "forward_ms")
    structured = any(isinstance(doc.get(k), dict) for k in ("ops", "layers"))
    if not structured:
        names = {str(k): ms(v, repr(k)) for k, v in doc.items() if k != "forward_ms"}
        return OpTimes({}, {}, forward, path, names)
    if not set(doc) <= {"ops", "layers", "forward_ms"}:
        raise CalibrationError('a structured timing file has only "ops", "layers" '
                               'and "forward_ms"', path=path, line=1)
    tables = {}
    for key in ("ops", "layers"):
        table = doc.get(key, {})
        if not isinstance(table, dict):
            raise CalibrationError(f'"{key}" must map names to ms', path=path, line=1)
        tables[key] = {str(k): ms(v, f"{key}[{k!r}]") for k, v in table.items()}
    return OpTimes(tables["ops"], tables["layers"], forward, path)
