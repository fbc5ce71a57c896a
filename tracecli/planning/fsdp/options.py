"""The knobs of ``--strategy fsdp2`` and ``--strategy fsdp1``, and the configuration they
resolve to on a run (:class:`~.setup.Setup`).

Every knob left at its default means "as the run did": the run's units, resharding,
prefetching, dtypes and mesh, read from its trace; a value given replaces the run's.
``--memory-gib`` is the per-GPU budget ``--compare`` tunes under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...errors import PlanError
from ...model import DTYPE_BYTES
from ...model.fsdp import ROOT
from ..spec import Kind, Knob, Options
from .model import FsdpInput
from .setup import WRAP_HELP, Setup, program_for, wrap_units

__all__ = ["Fsdp2Options", "Fsdp1Options", "setup_of", "WRAP", "RESHARD", "PREFETCH",
           "PARAM_DTYPE", "REDUCE_DTYPE", "MESH", "MEMORY"]

WRAP = Knob("fsdp_wrap", "--fsdp-wrap", Kind.TEXT, "",
            f"fsdp2/fsdp1: the units: {WRAP_HELP}. Default: the run's.")
RESHARD = Knob("fsdp_reshard_after_forward", "--fsdp-reshard-after-forward", Kind.TEXT, "",
               "fsdp2/fsdp1: true, false or (fsdp2) a group size dividing the shard group, for "
               "every unit but the root (fsdp1: false = SHARD_GRAD_OP). Default: the run's.")
PREFETCH = Knob("fsdp_prefetch", "--fsdp-prefetch", Kind.TEXT, "",
                "fsdp2: N: each unit prefetches the next N units in forward and the N before it "
                "in backward (set_modules_to_forward/backward_prefetch); implicit: FSDP2's own "
                "(the unit before, in backward). Default: the run's.")
PARAM_DTYPE = Knob("fsdp_param_dtype", "--fsdp-param-dtype", Kind.TEXT, "",
                   "fsdp2/fsdp1: MixedPrecisionPolicy param_dtype (all-gathers). Default: the run's.")
REDUCE_DTYPE = Knob("fsdp_reduce_dtype", "--fsdp-reduce-dtype", Kind.TEXT, "",
                    "fsdp2/fsdp1: reduce_dtype (reduce-scatters). Default: the run's, or "
                    "--fsdp-param-dtype when that is given.")
MESH = Knob("fsdp_mesh", "--fsdp-mesh", Kind.TEXT, "",
            "fsdp2: the device mesh, SHARD or REPLICATE,SHARD (HSDP), multiplying to --gpus. "
            "Default: the run's replicate size.")
MEMORY = Knob("memory_gib", "--memory-gib", Kind.GIB, None,
              "fsdp2/fsdp1: per-GPU memory budget of parameters and gradients, GiB: --compare "
              "tunes under it and says which plans exceed it.")
BACKWARD_PREFETCH = Knob("fsdp1_backward_prefetch", "--fsdp1-backward-prefetch", Kind.TEXT, "",
                         "fsdp1: backward_prefetch pre, post or none. Default: the run's.")
FORWARD_PREFETCH = Knob("fsdp1_forward_prefetch", "--fsdp1-forward-prefetch", Kind.TEXT, "",
                        "fsdp1: forward_prefetch true or false. Default: the run's.")
LIMIT = Knob("fsdp1_limit_all_gathers", "--fsdp1-limit-all-gathers", Kind.TEXT, "",
             "fsdp1: limit_all_gathers true or false. Default: true (torch's).")


@dataclass(frozen=True)
class Fsdp2Options(Options):
    fsdp_wrap: str = WRAP.field()
    fsdp_reshard_after_forward: str = RESHARD.field()
    fsdp_prefetch: str = PREFETCH.field()
    fsdp_param_dtype: str = PARAM_DTYPE.field()
    fsdp_reduce_dtype: str = REDUCE_DTYPE.field()
    fsdp_mesh: str = MESH.field()
    memory_gib: Optional[float] = MEMORY.field()


@dataclass(frozen=True)
class Fsdp1Options(Options):
    fsdp_wrap: str = WRAP.field()
    fsdp_reshard_after_forward: str = RESHARD.field()
    fsdp_param_dtype: str = PARAM_DTYPE.field()
    fsdp_reduce_dtype: str = REDUCE_DTYPE.field()
    fsdp1_backward_prefetch: str = BACKWARD_PREFETCH.field()
    fsdp1_forward_prefetch: str = FORWARD_PREFETCH.field()
    fsdp1_limit_all_gathers: str = LIMIT.field()
    memory_gib: Optional[float] = MEMORY.field()


def _flag(text: str, flag: str, default: bool) -> bool:
    value = text.strip().lower()
    if value == "":
        return default
    if value not in ("true", "false"):
        raise PlanError(f"{flag} must be true or false, not {text!r}")
    return value == "true"


def _dtype(text: str, flag: str, default: Optional[str]) -> Optional[str]:
    value = text.strip().removeprefix("torch.")
    if not value:
        return default
    if value not in DTYPE_BYTES or value in ("bool", "half", "float", "double"):
        raise PlanError(f"{flag} must be a torch dtype such as bfloat16, float16 or float32, "
                        f"not {text!r}")
    return value


def _mesh(text: str, gpus: int, f: FsdpInput) -> tuple[int, int]:
    """(shard, replicate) on ``gpus`` ranks."""
    value = text.strip()
    if not value:
        replicate = f.replicate if gpus % f.replicate == 0 else 1
        return gpus // replicate, replicate
    parts = value.split(",")
    if not all(p.strip().isdigit() and int(p) > 0 for p in parts) or len(parts) > 2:
        raise PlanError(f"--fsdp-mesh must be SHARD or REPLICATE,SHARD, not {text!r}")
    sizes = [int(p) for p in parts]
    replicate, shard = (1, sizes[0]) if len(sizes) == 1 else sizes
    if replicate * shard != gpus:
        raise PlanError(f"--fsdp-mesh {value} holds {replicate * shard} ranks, not the "
                        f"{gpus} of --gpus")
    return shard, replicate


def _reshard(text: str, f: FsdpInput, shard: int, system: str) -> dict[str, object]:
    value = text.strip().lower()
    if not value:
        return dict(f.reshard)
    if value in ("true", "false"):
        chosen: object = value == "true"
    elif system == "fsdp2" and value.isdigit() and 1 < int(value) < shard and shard % int(value) == 0:
        chosen = int(value)
    else:
        raise PlanError(f"--fsdp-reshard-after-forward must be true, false"
                        + (f" or a size dividing the shard group of {shard} (not 1, not "
                           f"{shard})" if system == "fsdp2" else "") + f", not {text!r}")
    return {u.name: (chosen if u.name != ROOT else f.reshard.get(ROOT, False)) for u in f.units}


def setup_of(f: FsdpInput, options, gpus: int) -> Setup:
    """The configuration ``options`` give on ``gpus`` ranks (defaults: the run's)."""
    fsdp2 = f.system == "fsdp2"
    shard, replicate = _mesh(getattr(options, "fsdp_mesh", ""), gpus, f) if fsdp2 else (gpus, 1)
    units, home = wrap_units(f, options.fsdp_wrap)
    reshard = _reshard(options.fsdp_reshard_after_forward, f, shard, f.system)
    reshard = {u.name: reshard.get(u.members[0] if "," in u.name else u.name,
                                   reshard.get(u.name, u.name != ROOT)) for u in units}
    if shard != f.shard and any(isinstance(v, int) and not isinstance(v, bool) for v in reshard.values()):
        reshard = {k: (True if isinstance(v, int) and not isinstance(v, bool) and
                       shard % v else v) for k, v in reshard.items()}
    param = _dtype(options.fsdp_param_dtype, "--fsdp-param-dtype", f.param_dtype or "float32")
    given_param = bool(options.fsdp_param_dtype.strip())
    reduce = _dtype(options.fsdp_reduce_dtype, "--fsdp-reduce-dtype",
                    param if given_param else (f.reduce_dtype or param))
    forward, backward = _prefetch(f, units, home, getattr(options, "fsdp_prefetch", ""))
    setup = Setup(f.system, shard, replicate, units, program_for(f.program, home, units),
                  reshard, forward, backward, param, reduce, param, run_shard=f.shard)
    if not fsdp2:
        mode = options.fsdp1_backward_prefetch.strip().lower() or f.backward_prefetch
        if mode not in ("pre", "post", "none"):
            raise PlanError(f"--fsdp1-backward-prefetch must be pre, post or none, not {mode!r}")
        setup = setup._replace(
            backward_prefetch=mode,
            forward_prefetch=_flag(options.fsdp1_forward_prefetch, "--fsdp1-forward-prefetch",
                                   f.forward_prefetch),
            limit_all_gathers=_flag(options.fsdp1_limit_all_gathers,
                                    "--fsdp1-limit-all-gathers", True))
    return setup


def _prefetch(f: FsdpInput, units, home, text: str) -> tuple[dict, dict]:
    """Explicit prefetch lists: the run's (renamed to the planned units), none
    (``implicit``), or each unit's next N units in forward order and N before it in
    backward."""
    names = [u.name for u in units]
    value = text.strip().lower()
    if value == "implicit":
        return {}, {}
    if value and not (value.isdigit() and 1 <= int(value) <= 64):
        raise PlanError(f"--fsdp-prefetch must be implicit or a depth from 1 to 64, not {text!r}")
    depth = int(value) if value else 0
    if depth <= 0:
        def moved(lists):
            out = {}
            for owner, targets in lists.items():
                new = tuple(dict.fromkeys(home[t] for t in targets if t in home))
                if home.get(owner) in names:
                    out[home[owner]] = new
            return out
        return moved(f.explicit_forward), moved(f.explicit_backward)
    forward = {n: tuple(names[i + 1:i + 1 + depth]) for i, n in enumerate(names)}
    backward = {n: tuple(reversed(names[max(1, i - depth):i])) for i, n in enumerate(names)}
    backward[names[0]] = tuple(reversed(names[-depth:])) if len(names) > 1 else ()
    return forward, backward
