"""Bucket strategies (DESIGN 4.4): a name -> spec registry, as PyTorch's
``ddp_comm_hooks`` registers its hooks.

Each spec (:class:`~tracecli.planning.spec.StrategySpec`) maps the gradients, in readiness
order, to buckets: tuples of indices into that order, with ``(grads, options, cost) ->
Grouping``. Strategies that name a real system reproduce its grouping exactly:

- ``per-tensor``, ``single``, ``size``: no framework's own (:mod:`.simple`).
- ``ddp``: PyTorch DDP's ``compute_bucket_assignment_by_size`` after the bucket rebuild.
- ``horovod``: Horovod's ``Controller::FuseResponses`` within each cycle.
- ``tf-spec``: tf_cnn_benchmarks' ``--all_reduce_spec`` parts and ``pack_small_tensors``.
- ``megatron``: Megatron-Core DDP's buffers and buckets (distributed optimizer: padded,
  reduce-scattered).
- ``fsdp2``, ``fsdp1``: PyTorch FSDP's units, all-gathers and reduce-scatters (an FSDP run's
  trace; :mod:`..fsdp`).
- ``optimal``: the exact best contiguous partition (see :mod:`..optimal`).
- ``observed``: the buckets a profiled run used, measured (taken from the run, not planned).

A new framework's strategy is one module defining its spec, and one line below.
"""

from __future__ import annotations

from ...errors import PlanError
from ..base import DDP_BUCKET_CAP, DDP_FIRST_BUCKET_BYTES, HOROVOD_THRESHOLD
from ..base import Grad, Grouping
from ..optimal import SPEC as _optimal
from ..spec import Options, StrategySpec, knob_table
from . import ddp as _ddp, horovod as _horovod, observed as _observed, simple as _simple
from . import tf_spec as _tf_spec
from . import deepspeed as _deepspeed, megatron as _megatron
from . import fsdp as _fsdp
from .ddp import ddp, ddp_buckets, ddp_limits
from .horovod import horovod, horovod_fuse
from .simple import per_tensor, single, size_greedy
from .tf_spec import SpecPart, extract_ranges, pack_small_tensors, parse_all_reduce_spec, tf_spec

__all__ = [
    "STRATEGIES", "predicted", "KNOBS", "Options", "StrategySpec", "spec_of", "options_of",
    "planned_spec", "Grad", "Grouping", "DDP_FIRST_BUCKET_BYTES",
    "DDP_BUCKET_CAP", "HOROVOD_THRESHOLD", "per_tensor", "single", "size_greedy", "ddp",
    "ddp_buckets", "ddp_limits", "horovod", "horovod_fuse", "tf_spec", "parse_all_reduce_spec",
    "pack_small_tensors", "extract_ranges", "SpecPart",
]

STRATEGIES: dict[str, StrategySpec] = {spec.name: spec for spec in (
    _simple.PER_TENSOR,
    _simple.SINGLE,
    _simple.SIZE,
    _ddp.SPEC,
    _horovod.SPEC,
    _tf_spec.SPEC,
    _megatron.SPEC,
    _deepspeed.SPEC,
    _fsdp.FSDP2,
    _fsdp.FSDP1,
    _optimal,
    _observed.OBSERVED,
)}
"""Every strategy by name, in the order the CLI offers them."""

KNOBS = knob_table(STRATEGIES.values())
"""Every strategy option once, in the CLI's order."""


def predicted() -> list[str]:
    """The strategies the planner predicts: all but those taken from a run."""
    return [name for name, spec in STRATEGIES.items() if not spec.from_run]


def spec_of(name: str) -> StrategySpec:
    """The spec named ``name``; a :class:`PlanError` naming the choices if none is."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise PlanError(f"unknown strategy {name!r}; use one of "
                        + ", ".join(STRATEGIES)) from None


def planned_spec(name: str) -> StrategySpec:
    """The spec of a strategy the planner predicts (``make_plan``'s choices)."""
    spec = STRATEGIES.get(name)
    if spec is None:
        raise PlanError(f"unknown strategy {name!r}; use one of "
                        + ", ".join(predicted()))
    if spec.from_run:
        raise PlanError(f"the {name} strategy is not predicted: it is the buckets a "
                        "profiled run used, planned from a trace that recorded its collectives")
    return spec


def options_of(name: str, given=None) -> Options:
    """Strategy ``name``'s options record from ``given`` (a mapping of knob values, e.g. the
    flags a user gave; knobs it does not read are ignored): ``options_of("ddp",
    {"max_bytes": 1 << 20})``."""
    return spec_of(name).options_of(given)
