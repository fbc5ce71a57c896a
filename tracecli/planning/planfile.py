"""Reading a plan file (``plan-buckets --out``) back: its gradients, compute and grouping."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import PlanError
from ..jsonfile import read_json
from .base import Grad
from .plan import PlanInput

__all__ = ["load_plan_file"]


def load_plan_file(path: str | Path) -> tuple[PlanInput, list[tuple[int, ...]], dict[str, Any]]:
    """``(plan input, buckets as gradient indices, the document)`` of a plan file."""
    path = str(path)
    doc = read_json(path, PlanError, "plan file")

    def bad(what: str) -> PlanError:
        return PlanError(path, 1, f"not a plan file ({what}); make one with tracecli "
                         "plan-buckets --out PLAN.json")

    if not isinstance(doc, dict):
        raise bad("not a JSON object")
    for key in ("strategy", "gradients", "buckets", "compute"):
        if key not in doc:
            raise bad(f"no {key!r}")
    grads = []
    index = {}
    for i, g in enumerate(doc["gradients"] if isinstance(doc["gradients"], list) else []):
        if not isinstance(g, dict) or not isinstance(g.get("name"), str) or not _num(g.get("ready_ms")) \
                or not isinstance(g.get("bytes"), int) or isinstance(g.get("bytes"), bool) or g["bytes"] < 0:
            raise bad(f"gradient {i} needs name, bytes and ready_ms")
        dtype = g.get("dtype") if isinstance(g.get("dtype"), str) else "float32"
        if g["name"] in index:
            raise bad(f"gradient {g['name']!r} listed twice")
        index[g["name"]] = i
        grads.append(Grad(g["name"], g["bytes"], dtype, g["bytes"] // 4, float(g["ready_ms"]), i))
    if not grads:
        raise bad("no gradients")
    buckets, seen = [], set()
    for k, b in enumerate(doc["buckets"] if isinstance(doc["buckets"], list) else []):
        names = b.get("tensors") if isinstance(b, dict) else None
        if not isinstance(names, list) or not names or any(n not in index for n in names):
            raise bad(f"bucket {k} names unknown tensors")
        members = tuple(index[n] for n in names)
        if seen & set(members):
            raise bad(f"bucket {k} repeats a tensor")
        seen |= set(members)
        buckets.append(members)
    if len(seen) != len(grads):
        raise bad("some gradients are in no bucket")
    compute = doc["compute"] if isinstance(doc["compute"], dict) else {}
    forward, backward = compute.get("forward_ms"), compute.get("backward_ms")
    if not _num(forward) or not _num(backward):
        raise bad("compute needs forward_ms and backward_ms")
    update = compute.get("update_ms", 0.0)
    inp = PlanInput(tuple(grads), float(forward), float(forward) + float(backward),
                    float(update) if _num(update) else 0.0,
                    f"plan file {path}: " + str(compute.get("source", "")))
    return inp, buckets, doc


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
