"""The code that sets up an FSDP plan, to paste: ``fully_shard`` calls (FSDP2) or
``FullyShardedDataParallel`` arguments (FSDP1), whole lines.

Units named like ``blocks.3`` are ``model.blocks[3]``; a run of units ``P.0 .. P.N-1`` with
the same settings is one loop over ``model.P``. FSDP1 units without module names (no
sidecar) are named in a comment.
"""

from __future__ import annotations

import re
from typing import Optional

from ...model.fsdp import ROOT
from .setup import Setup

__all__ = ["fsdp2_paste", "fsdp1_paste", "module_expr"]

_INDEXED = re.compile(r"^(.*?)\.(\d+)$")


def module_expr(name: str) -> str:
    """``model.blocks[3].attn`` for ``blocks.3.attn``; ``model`` for the root.

    >>> module_expr("blocks.3.attn"), module_expr("root")
    ('model.blocks[3].attn', 'model')
    """
    if name in (ROOT, ""):
        return "model"
    out = "model"
    for part in name.split("."):
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


def _torch_dtype(dtype: Optional[str]) -> str:
    return f"torch.{dtype}"


def fsdp2_paste(setup: Setup, run_param: Optional[str], run_reduce: Optional[str]) -> list[str]:
    """``fully_shard`` calls, children first, then the root, then prefetch lists."""
    lines = []
    mesh = ""
    if setup.replicate > 1:
        lines.append(f'mesh = init_device_mesh("cuda", ({setup.replicate}, {setup.shard}), '
                     'mesh_dim_names=("replicate", "shard"))')
        mesh = ", mesh=mesh"
    mp = ""
    if setup.param_dtype != run_param or setup.reduce_dtype != (run_reduce or setup.param_dtype) \
            or setup.param_dtype != setup.reduce_dtype:
        lines.append(f"mp = MixedPrecisionPolicy(param_dtype={_torch_dtype(setup.param_dtype)}, "
                     f"reduce_dtype={_torch_dtype(setup.reduce_dtype)})")
        mp = ", mp_policy=mp"
    calls = []
    for u in reversed(setup.units):  # children before the units around them
        if u.name == ROOT or u.parent is None:
            continue
        target = (f"[{', '.join(module_expr(m) for m in u.members)}]" if len(u.members) > 1
                  else module_expr(u.members[0]))
        calls.append((u.members, target, _reshard_arg(setup.reshard.get(u.name, True))))
    lines += _loops(list(reversed(calls)), mesh + mp)
    root = setup.units[0]
    root_reshard = setup.reshard.get(root.name, False)
    lines.append(f"fully_shard(model{mesh}{mp}" + (", reshard_after_forward=True" if root_reshard
                                                   is True else "") + ")")
    by = {u.name: u for u in setup.units}
    for what, lists in (("forward", setup.explicit_forward), ("backward", setup.explicit_backward)):
        for owner, targets in lists.items():
            if targets:
                owner_expr = module_expr(by[owner].members[0])
                items = ", ".join(module_expr(by[t].members[0]) for t in targets)
                lines.append(f"{owner_expr}.set_modules_to_{what}_prefetch([{items}])")
    return lines


def _reshard_arg(value) -> str:
    return "" if value is True else f", reshard_after_forward={value}"


def _loops(calls: list, extra: str) -> list[str]:
    """One ``fully_shard`` a unit, a loop for a run ``P.0 .. P.N-1`` set alike."""
    lines, i = [], 0
    while i < len(calls):
        members, target, arg = calls[i]
        m = _INDEXED.match(members[0]) if len(members) == 1 else None
        j = i + 1
        if m is not None and m.group(2) == "0":
            while j < len(calls) and len(calls[j][0]) == 1 and calls[j][2] == arg \
                    and calls[j][0][0] == f"{m.group(1)}.{j - i}":
                j += 1
        if j - i > 2:
            container = module_expr(m.group(1))
            lines.append(f"for layer in {container}[:{j - i}]:")
            lines.append(f"    fully_shard(layer{extra}{arg})")
        else:
            lines += [f"fully_shard({c[1]}{extra}{c[2]})" for c in calls[i:j]]
        i = j
    return lines


def fsdp1_paste(setup: Setup) -> list[str]:
    """``FullyShardedDataParallel(model, ...)`` with its wrap policy and settings."""
    inner = [u for u in setup.units if u.parent is not None]
    named = all(not u.name.startswith("unit") or "." in u.name for u in inner)
    lines = []
    if inner and named:
        lines.append("wrapped = {" + ", ".join(module_expr(u.members[0]) for u in inner) + "}")
        policy = "lambda module, recurse, nonwrapped_numel: recurse or module in wrapped"
    elif inner:
        lines.append(f"# the run's {len(inner)} inner units (pass --sizes FILE to name them)")
        policy = "the run's auto_wrap_policy"
    else:
        policy = None
    args = [f"auto_wrap_policy={policy}"] if policy else []
    if setup.reshard.get(inner[0].name if inner else ROOT, True) is False and inner:
        args.append("sharding_strategy=ShardingStrategy.SHARD_GRAD_OP")
    prefetch = {"pre": "BackwardPrefetch.BACKWARD_PRE", "post": "BackwardPrefetch.BACKWARD_POST",
                "none": "None"}[setup.backward_prefetch]
    args.append(f"backward_prefetch={prefetch}")
    args.append(f"forward_prefetch={setup.forward_prefetch}")
    args.append(f"limit_all_gathers={setup.limit_all_gathers}")
    if setup.param_dtype != setup.reduce_dtype or DTYPE_LOW.get(setup.param_dtype):
        args.append(f"mixed_precision=MixedPrecision(param_dtype={_torch_dtype(setup.param_dtype)}, "
                    f"reduce_dtype={_torch_dtype(setup.reduce_dtype)})")
    lines.append("model = FullyShardedDataParallel(model, " + ", ".join(args) + ")")
    return lines


DTYPE_LOW = {"bfloat16": True, "float16": True}
