"""Leaves of a reentrant backward that are no parameter: activation checkpointing's inputs.

``torch.utils.checkpoint(fn, x, use_reentrant=True)`` (and Megatron-Core's
``tensor_parallel.checkpoint``, the same mechanism) runs each block's backward inside its
``CheckpointFunctionBackward``: it detaches the block's saved inputs
(``detach_variable``, ``torch/utils/checkpoint.py:71-86``: ``inp.detach()``, then
``requires_grad`` copied from the input), reruns the block's forward on them (``:308-314``)
and calls ``torch.autograd.backward`` on its outputs (``:331``). That inner backward
accumulates into every leaf it reaches: the block's parameters, and the detached inputs
that require a gradient, whose ``.grad`` it returns to the outer graph (``:332-337``).
Those leaves are activations ([batch, seq, hidden] on a transformer): their
``AccumulateGrad`` is no parameter's gradient, and DDP never all-reduces it.

What the trace shows, and what it cannot (torch 2.13, ``tests/fixtures/kineto_modules/``):

- a reentrant backward is a backward op that holds backward ops; the ``aten::detach`` ops
  its node runs before its first inner backward op are ``detach_variable``'s, one per
  tensor input, with the input's shape and dtype (the recomputed forward's own
  ``detach`` calls, if any, come too: a superset);
- a leaf it accumulated whose shape and dtype are no detached input's is no checkpoint
  input; one whose shape and dtype are may be either: the trace records no tensor's
  identity, and a parameter may have the input's shape (``ckpt_square``: a [12,12] input
  and [12,12] weights; ``ckpt_swap``: ``h @ w`` and ``w @ h`` give the same events, the
  input's ``AccumulateGrad`` first in one, second in the other); nor can a count decide
  it: an input that requires no gradient is detached too and accumulates nothing
  (``ckpt_two_inputs``: two [6,12] detached, a [6,12] input and a [6,12] parameter
  accumulated), and a parameter two checkpointed blocks share is accumulated in each.

So a candidate (a leaf of a reentrant backward with a detached input's shape and dtype) is
set aside only on evidence that it is no parameter:

1. DDP's: the reducer's hook, registered on the ``AccumulateGrad`` of each parameter it
   reduces, records ``torch::distributed::reducer::mul_out`` inside that node's evaluation
   (``reducer.cpp``, ``mark_variable_ready_dense``; not with a comm hook, nor where the
   gradient already is a view of its bucket). Where every other gradient of the step
   carries it, a candidate without it is no gradient DDP reduces; a candidate with it is a
   parameter;
2. the sidecar's (``named_parameters()``: every parameter, frozen ones too): where every
   other gradient has the shape and dtype of one of its parameters, a candidate whose shape
   and dtype no parameter has is none.

Candidates neither settles stay gradients, and the note says how many and why.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

from ..model import CHECKPOINT_NOTE
from .kineto_events import DETACH, input_shape
from .kineto_threads import ACCUMULATE, EVALUATE, Thread, ancestor_indices

__all__ = ["set_aside", "DDP_HOOK"]


DDP_HOOK = "torch::distributed::reducer::mul_out"


def _holder(thread: Thread, i: int) -> Optional[int]:
    """The reentrant backward op holding gradient event ``i``: the innermost backward op
    around it other than its own ``AccumulateGrad``; ``None`` at the step's own level."""
    for j in ancestor_indices(thread, i):
        name = thread.events[j].name
        if name.startswith(EVALUATE) and not name.endswith(ACCUMULATE):
            return j
    return None


def _detached(thread: Thread, r: int) -> Counter:
    """(shape, dtype) of the ``aten::detach`` ops backward op ``r``'s node ran before its
    first inner backward op."""
    events, parent = thread.events, thread.parent
    node = -1
    out: Counter = Counter()
    j = r + 1
    while j < len(events) and events[j].ts < events[r].end:
        e = events[j]
        if e.name.startswith(EVALUATE):
            break
        if parent[j] == r and e.name == events[r].name[len(EVALUATE):]:
            node = j
        elif e.name == DETACH and parent[j] in (r, node):
            out[input_shape(e)] += 1
        j += 1
    return out


def _hooked(thread: Thread, i: int) -> bool:
    """Whether DDP's reducer ran its hook in the evaluation of gradient event ``i``'s node."""
    events = thread.events
    w = i if events[i].name.startswith(EVALUATE) else thread.parent[i]
    if w < 0 or not events[w].name.startswith(EVALUATE):
        return False
    j = w + 1
    while j < len(events) and events[j].ts < events[w].end:
        if events[j].name == DDP_HOOK and thread.parent[j] == w:
            return True
        j += 1
    return False


def _sig_text(sig) -> str:
    shape, dtype = sig
    return f"[{','.join(map(str, shape))}] {dtype}"


def set_aside(grads: Sequence[tuple[Thread, int]], variables: Optional[Sequence] = None,
              sizes_path: str = "the sidecar") -> tuple[list[int], Optional[str]]:
    """Which gradient events of ``grads`` (``AccumulateGrad``, ready order) are
    gradients, by the module's rule, and the note saying what was set aside and what may be
    a checkpoint input still (``None``: no reentrant backward accumulated anything)."""
    sigs = [input_shape(t.events[i]) for t, i in grads]
    detached: dict[tuple[int, int], Counter] = {}
    candidates: list[int] = []
    inside = unshaped = 0
    for k, (thread, i) in enumerate(grads):
        r = _holder(thread, i)
        if r is None:
            continue
        inside += 1
        if (id(thread), r) not in detached:
            detached[(id(thread), r)] = _detached(thread, r)
        if sigs[k][0] is None:
            unshaped += bool(detached[(id(thread), r)])
        elif sigs[k] in detached[(id(thread), r)]:
            candidates.append(k)
    if not inside:
        return list(range(len(grads))), None
    aside: dict[int, str] = {}
    open_ = candidates
    hooked = [_hooked(t, i) for t, i in grads]
    if any(hooked) and all(h or k in candidates for k, h in enumerate(hooked)):
        aside = {k: "ddp" for k in candidates if not hooked[k]}
        open_ = []  # the hooked ones are DDP's parameters
    if variables is not None and open_:
        side = {(tuple(v.shape), v.dtype) for v in variables}
        others = [k for k in range(len(grads)) if k not in candidates and sigs[k][0] is not None]
        if all(sigs[k] in side for k in others):
            aside.update({k: "sidecar" for k in open_ if sigs[k] not in side})
            open_ = [k for k in open_ if k not in aside]
    kept = [k for k in range(len(grads)) if k not in aside]
    return kept, _note(aside, open_, sigs, unshaped, variables is not None, sizes_path)


def _note(aside: dict, open_: list[int], sigs, unshaped: int, sidecar: bool,
          sizes_path: str) -> Optional[str]:
    parts = []
    for why, text in (("ddp", "DDP's reducer hook ran on every other gradient of the step and "
                               "not on them"),
                      ("sidecar", f"no parameter of {sizes_path} has their shape and dtype")):
        ks = [k for k, w in aside.items() if w == why]
        if ks:
            parts.append(f"{len(ks)} set aside, not gradients: {text} (e.g. {_sig_text(sigs[ks[0]])})")
    if open_:
        settle = ("the sidecar cannot tell: it has parameters of that shape and dtype" if sidecar
                  else "a sidecar of parameter names (--sizes FILE) settles it where no "
                       "parameter has that shape")
        parts.append(f"{len(open_)} kept as gradients but may be checkpoint inputs, not "
                     f"parameters (e.g. {_sig_text(sigs[open_[0]])}): the trace records no "
                     f"tensor's identity; {settle}")
    if unshaped:
        parts.append(f"{unshaped} kept as gradients with no recorded shape: whether they are "
                     "checkpoint inputs cannot be told (profile with record_shapes=True)")
    if not parts:
        return None
    return (CHECKPOINT_NOTE + "leaves a reentrant backward (torch.utils.checkpoint, "
            "use_reentrant=True) accumulated with the shape of an input it detached: "
            + "; ".join(parts) + " (docs/inputs.md)")
