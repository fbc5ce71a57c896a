"""JSON documents of the output contracts (DESIGN 5): plain dicts, stable key order."""

from __future__ import annotations

import json
from typing import Any

from ..analysis import Readiness, SizeReport
from ..model import Trace

__all__ = ["dumps", "inspect_doc"]


def dumps(doc: Any) -> str:
    """Deterministic JSON text: insertion-ordered keys, two-space indent, newline-terminated."""
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _number(x):
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def inspect_doc(trace: Trace, ready: Readiness, sizes: SizeReport,
                extra_gradient_fields=None) -> dict:
    """The ``inspect --json`` document.

    ``extra_gradient_fields`` maps a tensor id to more keys for its gradient entry
    (shapes and ready times from the compute model).
    """
    extra = extra_gradient_fields or {}
    gradients = []
    for g in ready.gradients:
        entry = {
            "name": g.name,
            "layer": g.layer,
            "bytes": g.nbytes,
            "ready_index": g.ready_index,
            "elements": g.elements,
            "dtype": g.dtype,
            "shape": list(g.shape) if g.shape is not None else None,
            "backward_position": g.backward_position,
            "ready_source": g.source,
            "ready_op": g.op_name,
        }
        entry.update(extra.get(g.tensor_id, {}))
        gradients.append(entry)
    layers = []
    cumulative = 0
    for layer in ready.layers:
        if layer.nbytes is not None and cumulative is not None:
            cumulative += layer.nbytes
        else:
            cumulative = None
        layers.append({
            "name": layer.name,
            "params": layer.elements,
            "bytes": layer.nbytes,
            "ready_index": layer.ready_index,
            "backward_position": layer.backward_position,
            "tensors": list(layer.tensors),
            "cumulative_bytes": cumulative,
        })
    return {
        "trace": {
            "path": trace.path,
            "format": trace.format,
            "ops": len(trace.ops()),
            "tensors": len(trace.tensors()),
            "ops_by_kind": trace.counts(),
            "sizes_file": trace.meta.get("sizes"),
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


def plan_doc(plan) -> dict:
    """The ``plan-buckets --json`` document, also the plan file replay reads (DESIGN 5)."""
    t = plan.timeline
    o = plan.options
    return {
        "strategy": plan.strategy,
        "max_bytes": o.max_bytes,
        "gpus": plan.cost.gpus,
        "cost_model": plan.cost.describe(),
        "options": {
            "first_bucket_bytes": o.first_bucket_bytes, "cycle_ms": o.cycle_ms, "spec": o.spec,
            "agg_small_grads_max_bytes": o.agg_small_grads_max_bytes,
            "agg_small_grads_max_group": o.agg_small_grads_max_group,
        },
        "compute": {
            "source": plan.inp.compute_source,
            "forward_ms": t.forward_ms,
            "backward_ms": t.backward_end_ms - t.forward_ms,
            "update_ms": t.update_ms,
        },
        "gradients": [
            {"name": g.name, "bytes": g.nbytes, "dtype": g.dtype, "ready_ms": g.ready_ms}
            for g in plan.inp.grads
        ],
        "buckets": [
            {
                "index": b.index,
                "tensors": plan.tensor_names(b.index),
                "bytes": b.nbytes,
                "dtype": b.dtype,
                "ready_ms": b.ready_ms,
                "start_ms": b.start_ms,
                "end_ms": b.end_ms,
                "duration_ms": b.duration_ms,
            }
            for b in t.buckets
        ],
        "predicted": {
            "iteration_ms": t.iteration_ms,
            "compute_ms": t.compute_ms,
            "exposed_comm_ms": t.exposed_comm_ms,
            "comm_ms": t.comm_ms,
            "overlap_pct": t.overlap_pct,
            "lower_bound_ms": plan.lower_bound_ms,
            "ratio_to_lower_bound": t.iteration_ms / plan.lower_bound_ms if plan.lower_bound_ms else None,
        },
        "settings": plan.settings,
    }


def compare_doc(rows) -> dict:
    return {"compare": [
        {"label": r.label, "strategy": r.plan.strategy, "buckets": len(r.plan.buckets),
         "iteration_ms": r.plan.timeline.iteration_ms,
         "exposed_comm_ms": r.plan.timeline.exposed_comm_ms,
         "overlap_pct": r.plan.timeline.overlap_pct, "settings": r.plan.settings}
        for r in rows
    ]}
