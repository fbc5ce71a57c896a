"""DDP as it runs in each of its modes (issue 24 item 4), and how a profiler trace shows them.

torch 2.13, ``torch/nn/parallel/distributed.py`` as installed (``D:line``; the reducer's
rules as ``tests/fixtures/kineto/README.md`` states and its runs check):

- ``find_unused_parameters=True`` (without ``static_graph``): the reducer never rebuilds
  (``Reducer::should_rebuild_buckets`` is ``(static_graph_ || !find_unused_parameters_) &&
  !has_rebuilt_bucket_``), so every step uses the buckets made at construction:
  ``compute_bucket_assignment_by_size`` over the parameters in definition order with limits
  ``[first_bucket_bytes_cap, bucket_bytes_cap]`` (D:155-157), sorted by their first index and
  handed to the reducer reversed (D:1439): the bucket of the LAST parameters is launched
  first, the first-bucket cap lands on the bucket of the FIRST parameters, launched last.
  A parameter without a gradient this step is marked ready at the first hook and its
  (zeroed) elements still travel in its bucket. After the last bucket, an int32 all-reduce of
  the used map, one element per parameter, every step.
- ``static_graph=True``: rebuilt once, in ready order, as by default; parameters unused when
  it recorded the order are pushed after all the used ones, in index order, so they sit at
  the end of the last bucket; no used-map all-reduce after the first step.

A trace shows ``find_unused_parameters=True`` by that used-map all-reduce (its collectives'
purpose ``unused-map``), and parameters that travel without a gradient by its gradient
all-reduces carrying more bytes than its gradients: with the map that is
``find_unused_parameters``, without it ``static_graph`` (without either DDP stops at the next
step). Parameters of the sidecar that neither have a gradient nor travel are frozen: DDP
leaves them out.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from ..base import Grad

__all__ = ["Param", "construction_buckets", "static_graph_order", "ddp_params", "RunMode",
           "run_mode"]


class Param(NamedTuple):
    """One of DDP's parameters, in definition order: its gradient's index in readiness order
    (``None``: no gradient this step: unused, its elements zeros in its bucket)."""

    name: str
    nbytes: int
    dtype: str
    grad: Optional[int]
    sparse: bool = False


def construction_buckets(params: Sequence[Param], limits: Sequence[int], ddp_buckets) -> list[list[int]]:
    """The construction-time buckets (indices into ``params``) in the reducer's launch order:
    DDP's size rule over definition order, sorted by first index, reversed.

    >>> from .ddp import ddp_buckets
    >>> MiB = 1 << 20
    >>> p = [Param(n, b, "float32", g) for n, b, g in [("inp.weight", MiB, 5), ("inp.bias", 4096, 4),
    ...      ("branch.weight", 2 * MiB, None), ("hidden.weight", 4 * MiB, 3)]]
    >>> construction_buckets(p, [MiB, 25 * MiB], ddp_buckets)
    [[1, 2, 3], [0]]
    """
    found = ddp_buckets([p.nbytes for p in params], [p.dtype for p in params], limits,
                        [p.sparse for p in params])
    return [list(b) for b in reversed(sorted(found, key=min))]


def static_graph_order(params: Sequence[Param], n_grads: int) -> list[int]:
    """The order ``static_graph`` rebuilds in: the gradients as they were ready, then the
    parameters without one, in definition order (indices into ``params``)."""
    of_grad = {p.grad: k for k, p in enumerate(params) if p.grad is not None}
    return [of_grad[i] for i in range(n_grads) if i in of_grad] + \
        [k for k, p in enumerate(params) if p.grad is None]


def ddp_params(grads: Sequence[Grad], shapes: Sequence[Optional[tuple]], variables) -> tuple[Param, ...]:
    """DDP's parameters in definition order from a sidecar's ``variables`` (name, shape,
    dtype, nbytes, in ``named_parameters()`` order) and the step's gradients (``grads`` in
    readiness order, each with its shape): a gradient takes the variable of its name, else
    one of its shape and dtype (the later-ready the earlier-defined, as backward runs); the
    variables left have no gradient this step."""
    by_name = {v.name: k for k, v in enumerate(variables)}
    taken: dict[int, int] = {}
    for i, g in enumerate(grads):
        k = by_name.get(g.name)
        if k is not None and k not in taken:
            taken[k] = i
    free: dict[tuple, list[int]] = {}
    for k, v in enumerate(variables):
        if k not in taken:
            free.setdefault((tuple(v.shape), v.dtype), []).append(k)
    left = [i for i in range(len(grads)) if i not in taken.values()]
    for i in sorted(left, key=lambda i: -grads[i].ready_ms):
        slots = free.get((tuple(shapes[i] or ()), grads[i].dtype))
        if not slots:
            return ()  # a gradient no variable accounts for: not this model's sidecar
        taken[slots.pop(0)] = i
    return tuple(Param(v.name, v.nbytes, v.dtype, taken.get(k), grads[taken[k]].sparse
                       if k in taken else False) for k, v in enumerate(variables))


class RunMode(NamedTuple):
    """DDP's mode as a trace shows it: the knobs to plan with, and the evidence (``why``)."""

    find_unused_parameters: bool
    static_graph: bool
    travelling: bool  # the parameters without a gradient travel in the buckets
    why: str


def run_mode(step_bytes: int, has_map: bool, map_elements: Optional[int], used_bytes: int,
             idle_bytes: int) -> Optional[RunMode]:
    """DDP's mode from one traced step: the bytes its gradient all-reduces carried, whether
    it all-reduced a used map (of how many elements), and the bytes of its gradients and of
    the sidecar's parameters without one. ``None``: the default mode (nothing shows another).

    >>> run_mode(7_391_272, True, 8, 5_292_072, 2_099_200).why.split(":")[0]
    'find_unused_parameters=True'
    >>> run_mode(7_391_272, False, None, 5_292_072, 2_099_200).static_graph
    True
    """
    travelling = idle_bytes > 0 and step_bytes == used_bytes + idle_bytes
    if has_map:
        what = f" of DDP's {map_elements} parameters" if map_elements else ""
        return RunMode(True, False, travelling, "find_unused_parameters=True: the trace "
                       f"all-reduces an int32 used map{what} after the last bucket")
    if travelling:
        return RunMode(False, True, True, "static_graph=True: parameters without a gradient "
                       f"travel in the buckets ({step_bytes:,} bytes all-reduced for "
                       f"{used_bytes:,} bytes of gradients) with no used-map all-reduce")
    return None
