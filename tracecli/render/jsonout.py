"""JSON documents of the output contracts (DESIGN 5): plain dicts, stable key order."""

from __future__ import annotations

import json
import json.encoder  # c_make_encoder: the C encoder, made once
from typing import Any, Optional

from ..analysis import Readiness, SizeReport
from ..model import Trace
from .jsonrows import Encoded, gradient_dicts, gradient_rows, layer_dicts, layer_rows

__all__ = ["dumps", "inspect_json", "COMPACT"]


# One line, as json.dumps(value, ensure_ascii=False) writes it, no NaN; the exports share it.
COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


def _row_encoder():
    """``COMPACT.encode`` without its per-call set-up: the C encoder made once (rows of
    a big document are a hundred thousand calls). Documents hold no cycles."""
    make = json.encoder.c_make_encoder
    if make is None:  # an interpreter without the C accelerator
        return COMPACT.encode
    encode = make(None, COMPACT.default, json.encoder.encode_basestring, None, ": ", ", ",
                  False, False, False)
    return lambda value: "".join(encode(value, 0))


_encode_row = _row_encoder()


def dumps(doc: Any) -> str:
    """Deterministic JSON text, newline-terminated: insertion-ordered keys; the top two
    levels indented, one row of a list (a gradient, a bucket) per line. Rows go through the
    C encoder, so a 500,000-gradient document takes a second, not ten.

    >>> print(dumps({"a": {"b": 1}, "rows": [{"x": 1}, {"x": 2}], "n": [1, 2]}), end="")
    {
      "a": {
        "b": 1
      },
      "rows": [
        {"x": 1},
        {"x": 2}
      ],
      "n": [1, 2]
    }
    """
    parts: list[str] = []
    _encode(doc, 0, parts)
    parts.append("\n")
    return "".join(parts)  # one copy of a text that may be tens of megabytes


def _encode(value: Any, depth: int, parts: list[str]) -> None:
    """Append the text of ``value`` at ``depth`` to ``parts``."""
    pad = "  " * (depth + 1)
    end = "\n" + "  " * depth
    if type(value) is Encoded:
        if not value:
            parts.append("[]")
            return
        parts += ("[\n", pad, f",\n{pad}".join(value), end, "]")
        return
    if depth < 2 and isinstance(value, dict) and value:
        parts.append("{\n")
        for k, (key, item) in enumerate(value.items()):
            parts += (",\n" if k else "", pad, COMPACT.encode(str(key)), ": ")
            _encode(item, depth + 1, parts)
        parts += (end, "}")
        return
    if depth < 2 and isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        parts += ("[\n", pad, f",\n{pad}".join(map(_encode_row, value)), end, "]")
        return
    parts.append(COMPACT.encode(value))


def _number(x):
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def inspect_json(trace: Trace, ready: Readiness, sizes: SizeReport, extra_gradient_fields=None,
                 compute_source: Optional[str] = None) -> str:
    """The ``inspect --json`` document as text (``dumps`` of its dicts), with
    ``readiness.compute_source`` set; its rows are written straight from the records where
    their values allow (:mod:`.jsonrows`), else from the dicts.

    ``extra_gradient_fields`` maps a tensor id to more keys for its gradient entry
    (shapes and ready times from the compute model).
    """
    extra = extra_gradient_fields or {}
    gradients = gradient_rows(ready, extra)
    layers = layer_rows(ready)
    doc = _document(trace, ready, sizes,
                    gradients if gradients is not None else gradient_dicts(ready, extra),
                    layers if layers is not None else layer_dicts(ready))
    doc["readiness"]["compute_source"] = compute_source
    return dumps(doc)


def _document(trace: Trace, ready: Readiness, sizes: SizeReport, gradients: list,
              layers: list) -> dict:
    return {
        "trace": {
            "path": trace.path,
            "format": trace.format,
            "ops": len(trace.ops()),
            "tensors": len(trace.tensors()),
            "ops_by_kind": trace.counts(),
            "sizes_file": trace.meta.sizes,
        },
        "parameters": {
            "count": sizes.parameters,
            "bytes": sizes.parameter_bytes,
            "elements": sizes.parameter_elements,
            "without_gradient": list(ready.without_gradient),
        },
        "activations": {"count": sizes.activations, "bytes": sizes.activation_bytes},
        "inputs": {"count": sizes.inputs, "bytes": sizes.input_bytes},
        "readiness": {"method": ready.method, "backward_ops": len(ready.backward_ops)},
        "gradients": gradients,
        "layers": layers,
        **_recorded(trace),
        "statistics": {
            "count": sizes.gradients,
            "known": sizes.known,
            "min": sizes.min,
            "median": _number(sizes.median),
            "mean": sizes.mean,
            "max": sizes.max,
            "total": sizes.total,
            "histogram": [
                {"low": c.low, "high": c.high, "count": c.count, "bytes": c.nbytes}
                for c in sizes.histogram
            ],
        },
    }


def _recorded(trace: Trace) -> dict:
    """What traces of a real run add: the step, the notes, and the run's collectives."""
    extra: dict = {}
    if trace.step is not None:
        extra["step"] = {k: (list(v) if isinstance(v, tuple) else v)
                         for k, v in trace.step._asdict().items()}
    if trace.meta.notes:
        extra["notes"] = list(trace.meta.notes)
    if trace.collectives():
        extra["collectives"] = [
            {"step": c.step, "kind": c.kind.value, "elements": c.elements, "bytes": c.nbytes,
             "dtype": c.dtype, "launch_ms": c.launch_ms, "start_ms": c.start_ms,
             "end_ms": c.end_ms, "purpose": c.purpose.value, "group_size": c.group_size}
            for c in trace.collectives()
        ]
    if trace.meta.fsdp is not None:
        extra["fsdp"] = trace.meta.fsdp.to_json()
    return extra


def compare_doc(rows) -> dict:
    """``--compare --json``: rows best first; a measured as-run row, when the trace has one,
    comes first and every row then says how it compares with it (``vs_as_run_pct``)."""
    as_run = rows[0].plan if rows and rows[0].plan.measured else None
    out = []
    for r in rows:
        row = {"label": r.label, "strategy": r.plan.strategy, "buckets": len(r.plan.buckets),
               "iteration_ms": r.plan.timeline.iteration_ms,
               "exposed_comm_ms": r.plan.timeline.exposed_comm_ms,
               "overlap_pct": r.plan.timeline.overlap_pct, "settings": r.plan.settings}
        if as_run is not None:
            base = as_run.timeline.iteration_ms
            row["measured"] = r.plan.measured
            row["vs_as_run_pct"] = 100.0 * (r.plan.timeline.iteration_ms - base) / base if base else None
        out.append(row)
    doc = {"compare": out}
    advice = [r.plan.fsdp.advice.to_json() for r in rows
              if r.plan.fsdp is not None and r.plan.fsdp.advice is not None]
    if advice:  # FSDP's own verdicts (a sharded run's trace)
        doc["fsdp_advice"] = advice
    return doc
