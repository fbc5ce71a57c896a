"""The plan file (``plan-buckets --out``, also ``plan-buckets --json``): written, read
back and checked here, and nowhere else.

The document: ``{"strategy", "max_bytes", "gpus", "cost_model", "options", "compute",
"gradients", "buckets", "predicted", "settings"}`` (``docs/json.md``: ``plan-buckets --json``);
a gradient carries its parameter's marks (``expert``, ``shared_embedding``, ``comm_dtype``:
:class:`~tracecli.model.ParamMeta`) where it has any. Read
back, it gives the planner's input and the plan's grouping, so replay runs exactly it.
Everything a replay will act on is checked here, before any rank starts: names are
strings, byte counts integers of at most 1 PiB, dtypes ones replay can allocate, times
finite and within a step of at most ~2.8 hours, every gradient in exactly one bucket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Optional

from ..errors import PlanError, excerpt
from ..jsonfile import finite_number, read_json
from ..model import DTYPE_BYTES, CollectiveKind, ParamMeta
from ..model.fsdp import contract_name
from .base import FixedPlan, Grad, Message, PlanInput
from .spec import MAX_OPTION_BYTES, NoOptions, Options
from .strategies import KNOBS, STRATEGIES

__all__ = ["plan_document", "load_plan_file", "PlanFile", "MAX_PLAN_BYTES", "MAX_PLAN_MS",
           "REPLAYABLE_DTYPES"]

MAX_PLAN_BYTES = MAX_OPTION_BYTES
MAX_PLAN_MS = 1e7
REPLAYABLE_DTYPES = ("float32", "float16", "bfloat16", "float64", "half", "float", "double")


# What a bucket of a plan file may carry, and which of those must hold one gradient.
PLAN_COLLECTIVES = {CollectiveKind.ALL_REDUCE: False, CollectiveKind.ALL_GATHER: True,
                    CollectiveKind.REDUCE_SCATTER: False}


ALL_GATHER = CollectiveKind.ALL_GATHER
_COLLECTIVES_TEXT = " or ".join(k.value for k, one in PLAN_COLLECTIVES.items() if not one) + \
    ", or " + " or ".join(f"{k.value} of one gradient" for k, one in PLAN_COLLECTIVES.items() if one)


class PlanFile(NamedTuple):
    inp: PlanInput
    fixed: FixedPlan  # its grouping, by gradient index, with each bucket's collective
    options: Options  # the strategy's knobs it was planned with
    doc: dict[str, Any]


def plan_document(plan) -> dict[str, Any]:
    """The document of a :class:`~.plan.BucketPlan` (see the module's docstring)."""
    t, o = plan.timeline, plan.options
    doc = {
        "strategy": plan.strategy,
        "max_bytes": getattr(o, "max_bytes", None),
        "gpus": plan.cost.gpus,
        "cost_model": plan.cost.describe(),
        "options": {k: v for k, v in o.to_json().items() if k != "max_bytes"},
        "compute": {
            "source": plan.inp.compute_source,
            "forward_ms": t.forward_ms,
            "backward_ms": t.backward_end_ms - t.forward_ms,
            "update_ms": t.update_ms,
        },
        "gradients": [
            {"name": g.name, "bytes": g.nbytes, "dtype": g.dtype, "ready_ms": g.ready_ms,
             **({"sparse": True} if g.sparse else {}), **g.meta.to_json()}
            for g in plan.inp.grads
        ],
        "buckets": [_bucket(plan, b) for b in t.buckets],
        "predicted": {
            "iteration_ms": t.iteration_ms,
            "compute_ms": t.compute_ms,
            "exposed_comm_ms": t.exposed_comm_ms,
            "comm_ms": t.comm_ms,
            "overlap_pct": t.overlap_pct,
            "lower_bound_ms": plan.lower_bound_ms,
            "ratio_to_lower_bound": (t.iteration_ms / plan.lower_bound_ms
                                     if plan.lower_bound_ms else None),
        },
        "settings": plan.settings,
    }
    if plan.fsdp is not None:
        doc["fsdp"] = plan.fsdp.to_json()
    if plan.measured:
        doc["measured_timeline"] = True
    if plan.notes:
        doc["notes"] = list(plan.notes)
    return doc


def _bucket(plan, b) -> dict[str, Any]:
    doc = {
        "index": b.index,
        "tensors": plan.tensor_names(b.index),
        "bytes": b.nbytes,
        "dtype": b.dtype,
        "ready_ms": b.ready_ms,
        "start_ms": b.start_ms,
        "end_ms": b.end_ms,
        "duration_ms": b.duration_ms,
        "collective": b.collective.value if b.phase is None else contract_name(b.collective),
        **({"phase": b.phase, "unit": b.unit, "elements": b.elements, "channel": b.channel,
            "group_size": b.group} if b.phase is not None else {}),
    }
    if not b.pieces:
        doc.update(_costed(plan, b.collective, b.nbytes))
        return doc
    doc["pieces"] = [{"bytes": p.nbytes, "start_ms": p.start_ms, "end_ms": p.end_ms,
                      "duration_ms": p.end_ms - p.start_ms,
                      **_costed(plan, b.collective, p.nbytes)} for p in b.pieces]
    return doc


def _costed(plan, collective, nbytes: int) -> dict[str, Any]:
    """How the cost model timed one collective of ``nbytes``: its basis (measured,
    interpolated, ...) and NCCL's pick, where the model says."""
    if plan.measured:
        return {}
    basis = plan.cost.basis(collective, nbytes)
    pick = plan.cost.algorithm_protocol(collective, nbytes)
    return {**({"cost_basis": basis} if basis is not None else {}),
            **({"algorithm": pick[0], "protocol": pick[1]} if pick is not None else {})}


def load_plan_file(path: str | Path) -> PlanFile:
    """A plan file, checked through (see the module's docstring)."""
    path = str(path)
    doc = read_json(path, PlanError, "plan file")

    def bad(what: str) -> PlanError:
        return PlanError(f"not a valid plan file ({what}); make one with tracecli "
                         "plan-buckets --out PLAN.json", path=path, line=1)

    if not isinstance(doc, dict):
        raise bad("not a JSON object")
    for key in ("strategy", "gradients", "buckets", "compute"):
        if key not in doc:
            raise bad(f"no {key!r}")
    if not isinstance(doc["strategy"], str) or len(doc["strategy"]) > 100:
        raise bad("strategy must be a short string")
    if "fsdp" in doc:
        raise PlanError(f"an FSDP plan ({doc['strategy'][:20]}) holds no FSDP units, so it "
                        "cannot be read back as a plan: replay it from its trace (tracecli "
                        f"replay TRACE --strategy {doc['strategy'][:20]} with the plan's knobs)",
                        path=path, line=1)
    grads, index = _gradients(doc, bad)
    buckets, collectives, messages = _buckets(doc, grads, index, bad)
    inp = _compute(doc, tuple(grads), path, bad)
    options = _options(doc, bad)
    exact = all(m == (sum(grads[i].nbytes for i in b), None, ()) for m, b in zip(messages, buckets))
    sent = None if exact else tuple(Message(n, d or grads[b[0]].dtype, p)
                                    for (n, d, p), b in zip(messages, buckets))
    return PlanFile(inp, FixedPlan(tuple(buckets), doc["strategy"], tuple(collectives), sent),
                    options, doc)


def _ms(value, what: str, bad) -> float:
    if not finite_number(value) or not 0 <= value <= MAX_PLAN_MS:
        raise bad(f"{what} must be a number of ms from 0 to {MAX_PLAN_MS:g}")
    return float(value)


def _gradients(doc: dict, bad) -> tuple[list[Grad], dict[str, int]]:
    """The plan's gradients, each checked, and their places by name."""
    if not isinstance(doc["gradients"], list) or not doc["gradients"]:
        raise bad("gradients must be a non-empty list")
    grads, index = [], {}
    for i, g in enumerate(doc["gradients"]):
        if not isinstance(g, dict):
            raise bad(f"gradient {i} is not an object")
        name, nbytes, dtype = g.get("name"), g.get("bytes"), g.get("dtype", "float32")
        if not isinstance(name, str) or not name or len(name) > 4096:
            raise bad(f"gradient {i} needs a name")
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 <= nbytes <= MAX_PLAN_BYTES:
            raise bad(f"gradient {i} ({excerpt(name)}): bytes must be an integer from 0 to 2^50")
        if not isinstance(dtype, str) or dtype not in REPLAYABLE_DTYPES:
            raise bad(f"gradient {i} ({excerpt(name)}): dtype must be one of "
                      + ", ".join(REPLAYABLE_DTYPES))
        if name in index:
            raise bad(f"gradient {excerpt(name)} listed twice")
        sparse = g.get("sparse", False)
        if not isinstance(sparse, bool):
            raise bad(f"gradient {i} ({excerpt(name)}): sparse must be true or false")
        try:
            meta = ParamMeta.read(g)
        except ValueError as exc:
            raise bad(f"gradient {i} ({excerpt(name)}): {exc}") from None
        index[name] = i
        ready = _ms(g.get("ready_ms"), f"gradient {i} ready_ms", bad)
        grads.append(Grad(name, nbytes, dtype, nbytes // DTYPE_BYTES[dtype], ready, i, sparse, meta))
    return grads, index


def _buckets(doc: dict, grads: list[Grad], index: dict[str, int], bad):
    """Each bucket's members, collective and what it sends; every gradient in exactly one."""
    if not isinstance(doc["buckets"], list) or not doc["buckets"]:
        raise bad("buckets must be a non-empty list")
    buckets, collectives, messages, seen = [], [], [], set()
    for k, b in enumerate(doc["buckets"]):
        names = b.get("tensors") if isinstance(b, dict) else None
        if not isinstance(names, list) or not names or \
                any(not isinstance(n, str) or n not in index for n in names):
            raise bad(f"bucket {k} must list names of the plan's gradients")
        members = tuple(index[n] for n in names)
        if seen & set(members) or len(set(members)) != len(members):
            raise bad(f"bucket {k} repeats a gradient")
        collective = _collective(b.get("collective", CollectiveKind.ALL_REDUCE.value))
        if collective is None or (PLAN_COLLECTIVES[collective] and len(members) != 1):
            raise bad(f"bucket {k}: collective must be {_COLLECTIVES_TEXT}")
        seen |= set(members)
        buckets.append(members)
        collectives.append(collective)
        messages.append(_message(b, k, [grads[i] for i in members], collective, bad))
    if len(seen) != len(grads):
        raise bad("some gradients are in no bucket")
    return buckets, collectives, messages


def _compute(doc: dict, grads: tuple[Grad, ...], path: str, bad) -> PlanInput:
    """The planner's input: the gradients and the plan's compute times."""
    compute = doc["compute"] if isinstance(doc["compute"], dict) else {}
    forward = _ms(compute.get("forward_ms"), "compute.forward_ms", bad)
    backward = _ms(compute.get("backward_ms"), "compute.backward_ms", bad)
    update = _ms(compute.get("update_ms", 0.0), "compute.update_ms", bad)
    if forward + backward + update > MAX_PLAN_MS:
        raise bad(f"forward + backward + update must not exceed {MAX_PLAN_MS:g} ms")
    source = compute.get("source", "")
    return PlanInput(grads, forward, forward + backward, update,
                     f"plan file {path}: " + (source[:500] if isinstance(source, str) else ""))


def _message(b: dict, k: int, grads: list, collective, bad) -> tuple[int, Optional[str], tuple]:
    """``(bytes, dtype, pieces)`` a bucket's collective sends: its gradients', or, for a
    reduction the plan says sends otherwise, the plan's bucket ``bytes`` and ``dtype``:
    more than its gradients (Megatron's padding, fp32 reduction), or in a dtype of its own
    (DeepSpeed's communication dtype); ``dtype`` ``None``: the gradients'. ``pieces``: the
    bytes of each collective a bucket is sent as, where several. A bucket ``bytes`` of
    another kind (an edited gradient size the bucket did not follow) is read as before:
    the bucket sends its gradients."""
    own = sum(g.nbytes for g in grads)
    nbytes, dtype = b.get("bytes"), b.get("dtype")
    theirs = {g.dtype for g in grads}
    pieces = _pieces(b, k, nbytes, bad)
    if collective is ALL_GATHER or type(nbytes) is not int or nbytes <= 0 or \
            (nbytes <= own and (dtype not in REPLAYABLE_DTYPES or dtype in theirs)):
        return own, None, pieces if sum(pieces) == own else ()
    if nbytes > MAX_PLAN_BYTES:
        raise bad(f"bucket {k}: bytes must be an integer up to 2^50")
    if dtype not in REPLAYABLE_DTYPES:
        raise bad(f"bucket {k}: dtype must be one of " + ", ".join(REPLAYABLE_DTYPES))
    return nbytes, dtype, pieces


def _pieces(b: dict, k: int, nbytes, bad) -> tuple[int, ...]:
    """The bytes of each collective a split bucket is sent as (its ``pieces``), which must
    add up to its ``bytes``; ``()`` where it is sent as one."""
    pieces = b.get("pieces")
    if pieces is None:
        return ()
    if not isinstance(pieces, list) or len(pieces) < 2 or len(pieces) > 1 << 20:
        raise bad(f"bucket {k}: pieces must be a list of at least two collectives")
    sizes = tuple(p.get("bytes") if isinstance(p, dict) else None for p in pieces)
    if any(type(n) is not int or not 0 < n <= MAX_PLAN_BYTES for n in sizes) or sum(sizes) != nbytes:
        raise bad(f"bucket {k}: each piece needs bytes, a positive integer, adding up to the "
                  "bucket's bytes")
    return sizes


def _options(doc: dict, bad) -> Options:
    """The knobs the plan's strategy reads, as it was made with them (a knob the file does
    not name keeps its default; ``max_bytes`` is the document's own field), each checked by
    its knob as the command line checks it. A strategy tracecli does not know has none."""
    given = doc.get("options", {})
    if not isinstance(given, dict):
        raise bad("options must be an object")
    values = {"max_bytes": doc.get("max_bytes")}
    for knob in KNOBS:  # every knob the file names is checked, read by its strategy or not
        value = values["max_bytes"] if knob.name == "max_bytes" else given.get(knob.name, knob.default)
        problem = knob.problem(value)
        if problem:
            raise bad(problem)
        values[knob.name] = value
    spec = STRATEGIES.get(doc["strategy"])
    return spec.options_of(values) if spec is not None else NoOptions()


def _collective(value: Any):
    """The plan-file collective named ``value``, or ``None``."""
    kinds = {kind.value: kind for kind in PLAN_COLLECTIVES}
    return kinds.get(value) if isinstance(value, str) else None
