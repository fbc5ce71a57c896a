"""FSDP's units of a module tree, by torch 2.13's own rules: which parameters each unit
holds, in the order its all-gather lays them out, their shards and padding, and the sizes of
its collectives. (The planner reads units from a run's trace; this derives them from a
model's module tree, and is checked against torch's own functions on random trees.)

FSDP2 (``fully_shard`` on the wrapped modules, children first, then the root): a unit's
parameters are those of its module's subtree not under an already wrapped module, module by
module in post-order (a module after its children, ``_fsdp_init.py:276-316``), each
module's own in registration order, a parameter once (``:341-366``); a subtree with none
makes no unit. Each parameter is split on dim 0 by ``torch.chunk`` into chunks of
``ceil(d0 / W)`` rows (the last ranks may get fewer or none, ``_fsdp_common.py:134-140``).

FSDP1 (``FullyShardedDataParallel`` with an auto-wrap policy): one ``FlatParameter`` per
wrapped module of the parameters of its subtree not in a nested unit, in pre-order
(``named_modules()``, ``_flat_param.py:688-741``); with ``use_orig_params`` each parameter
starts at a multiple of ``16 / itemsize`` elements and the total is padded to a multiple of
W (``:705-776``); every rank holds ``ceil(N / W)`` elements (``:1088-1139``).

A tree is given as torch's oracle takes it (``tests/fixtures/fsdp/fsdp_oracle.py``):
``{"params": {name: shape}, "children": {name: tree}, "wrap": bool}``.

>>> tree = {"params": {"w": [5, 3]}, "children": {"a": {"params": {"b": [7]}, "wrap": True}}}
>>> [(u["unit"], u["param_fqns_in_order"], u["all_gather_elements"]) for u in fsdp2_layout(tree, 4)]
[('root', ['w'], 24), ('a', ['a.b'], 8)]
>>> [(u["unit"], u["padded_unsharded_elements"]) for u in fsdp1_layout(tree, 4, True)]
[('root', 16), ('a', 8)]
"""

from __future__ import annotations

import math
from typing import Iterator, Optional

from ...errors import PlanError
from ...model import DTYPE_BYTES
from .model import padded_shard_numel

__all__ = ["fsdp2_layout", "fsdp1_layout", "rows_by_rank"]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _nodes(tree: dict, fqn: str = "") -> Iterator[tuple[str, dict]]:
    """Every module, pre-order (``named_modules()``)."""
    yield fqn, tree
    for name, child in tree.get("children", {}).items():
        yield from _nodes(child, _join(fqn, name))


def _wrapped(tree: dict) -> list[str]:
    """The units' modules: the root and every module marked ``wrap``."""
    return [fqn for fqn, node in _nodes(tree) if fqn == "" or node.get("wrap")]


def rows_by_rank(d0: int, world: int) -> list[int]:
    """Rows of dim 0 each rank holds: ``torch.chunk`` into chunks of ``ceil(d0 / W)``.

    >>> rows_by_rank(6, 4), rows_by_rank(1, 2)
    ([2, 2, 2, 0], [1, 0])
    """
    size = -(-d0 // world) if d0 else 0
    return [max(0, min(size, d0 - r * size)) for r in range(world)]


def fsdp2_layout(tree: dict, world: int, param_dtype: Optional[str] = None,
                 dtype: str = "float32") -> list[dict]:
    """FSDP2's units of ``tree`` on ``world`` ranks, in ``named_modules()`` order."""
    wrapped = set(_wrapped(tree))
    rows = []
    for fqn, node in _nodes(tree):
        if fqn not in wrapped:
            continue
        params = []
        _post_order(node, fqn, wrapped, params, top=True)
        if not params:
            continue  # fully_shard makes no group of a module with no parameters
        out = []
        for name, shape in params:
            if not shape:
                raise PlanError(f"{name} is a 0-dim parameter: fully_shard cannot shard it")
            rest = shape[1:]
            chunk = -(-shape[0] // world) if shape[0] else 0
            out.append({"fqn": name, "shape": list(shape),
                        "padded_sharded_shape": [chunk, *rest],
                        "padded_unsharded_shape": [chunk * world, *rest],
                        "sharded_shape_by_rank": {str(r): [n, *rest] for r, n in
                                                  enumerate(rows_by_rank(shape[0], world))}})
        shard = sum(padded_shard_numel(shape, world) for _, shape in params)
        rows.append({"unit": fqn or "root", "module_fqn": fqn, "params": out,
                     "param_fqns_in_order": [p["fqn"] for p in out],
                     "all_gather_input_elements": shard, "all_gather_elements": shard * world,
                     "all_gather_dtype": param_dtype or dtype,
                     "reduce_scatter_elements": sum(math.prod(p["padded_unsharded_shape"])
                                                    for p in out)})
    return rows


def _post_order(node: dict, fqn: str, wrapped: set, out: list, top: bool = False) -> None:
    if not top and fqn in wrapped:
        return  # a nested unit: fully_shard already took it
    for name, child in node.get("children", {}).items():
        _post_order(child, _join(fqn, name), wrapped, out)
    for name, shape in node.get("params", {}).items():
        out.append((_join(fqn, name), tuple(shape)))


def fsdp1_layout(tree: dict, world: int, use_orig_params: bool = False,
                 dtype: str = "float32") -> list[dict]:
    """FSDP1's units (flat parameters) of ``tree`` on ``world`` ranks, in
    ``named_modules()`` order."""
    wrapped = set(_wrapped(tree))
    align = 16 // DTYPE_BYTES[dtype] if use_orig_params else 0
    rows = []
    for fqn, node in _nodes(tree):
        if fqn not in wrapped:
            continue
        params = []
        _pre_order(node, fqn, wrapped, params, top=True)
        if not params:
            continue  # an FSDP instance without a FlatParameter
        pieces, total = [], 0
        for name, shape in params:
            if align and total % align:
                pieces.append({"padding": align - total % align})
                total += align - total % align
            n = math.prod(shape)
            pieces.append({"fqn": name, "shape": list(shape), "numel": n})
            total += n
        if align and total % world:
            pieces.append({"padding": world - total % world})
            total += world - total % world
        if total == 0:  # torch asserts on an empty shard (_flat_param.py:972-974, :1004)
            raise PlanError(f"FSDP1 unit {fqn or 'root'!r}: its parameters hold no elements, "
                            "and FSDP1 cannot shard an empty flat parameter; leave it unwrapped")
        sharded = -(-total // world)
        rows.append({"unit": fqn or "root", "module_fqn": fqn, "flat_param_layout": pieces,
                     "param_fqns_in_order": [p["fqn"] for p in pieces if "fqn" in p],
                     "aligned_numel": align, "unpadded_unsharded_elements": total,
                     "sharded_elements": sharded, "padded_unsharded_elements": sharded * world,
                     "all_gather_elements": sharded * world,
                     "reduce_scatter_elements": sharded * world})
    return rows


def _pre_order(node: dict, fqn: str, wrapped: set, out: list, top: bool = False) -> None:
    if not top and fqn in wrapped:
        return
    for name, shape in node.get("params", {}).items():
        out.append((_join(fqn, name), tuple(shape)))
    for name, child in node.get("children", {}).items():
        _pre_order(child, _join(fqn, name), wrapped, out)
