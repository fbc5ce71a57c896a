"""``megatron``: Megatron-Core's ``DistributedDataParallel`` gradient buckets, its
``DistributedDataParallelConfig`` settings and its tuning grid.

Read in Megatron-Core 0.16.1 (``distributed/distributed_data_parallel.py``
``DistributedDataParallel.__init__``, ``distributed/param_and_grad_buffer.py``
``_ParamAndGradBuffer.__init__``, ``partition_buckets``) and at 0.20.0, where the same rules
moved to ``group_params_for_buffers``, ``_compute_default_per_buffer_param_layout`` and
``DistributedOptimizer._compute_per_buffer_param_layout`` with ``optimizer/param_layout.py``:

- Trainable parameters, in ``named_parameters()`` order, go to one buffer per
  ``(param dtype, grad dtype, expert)``: the grad dtype is float32 with
  ``grad_reduce_in_fp32``, else the parameter's; expert-parallel ones
  (``param.allreduce == False``) in buffers of their own, after the dense ones.
- Each buffer walks its parameters in reverse; a bucket closes after the parameter that
  brings it to ``bucket_size`` elements (so it may pass it by one parameter), the rest form
  the last bucket. ``bucket_size`` defaults to ``max(40_000_000, 1_000_000 * dp)``; without
  ``overlap_grad_reduce`` (Megatron's default) it is ``None``: one bucket per buffer.
- With ``use_distributed_optimizer``: each parameter starts at a multiple of 64 elements, each
  bucket ends at a multiple of ``lcm(dp, 128)`` (``lcm(dp, 128, 2**16)`` with
  ``pad_buckets_for_high_nccl_busbw``), the bucket-size test counts that padding, a
  ``shared_embedding`` parameter closes the bucket before it and sits alone; the collective
  is a reduce-scatter of the padded bucket instead of an all-reduce.
- Without fp8 parameters each bucket is its own bucket group, whose collective starts when
  all of its parameters' gradients have been added (``register_grad_ready``), or, without
  ``overlap_grad_reduce``, all of them in ``finish_grad_sync`` once backward is done.

What a bucket sends is its whole ``grad_data``: the padded element count in the grad dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Optional, Sequence

from ...errors import PlanError
from ...model import CollectiveKind, DTYPE_BYTES
from ..base import Grad, Grouping
from ..spec import Kind, Knob, Options, StrategySpec

__all__ = ["megatron", "megatron_layout", "megatron_buckets", "megatron_bucket_size",
           "megatron_settings", "megatron_tuning", "MegatronBucket", "SPEC", "KNOBS", "MegatronOptions"]

BUCKET_SIZE = Knob(
    "megatron_bucket_size", "--megatron-bucket-size", Kind.COUNT, 0,
    "megatron: bucket_size in ELEMENTS (Megatron-LM --ddp-bucket-size); 0: Megatron's default, "
    "max(40M, 1M x --gpus). Read only with --megatron-overlap-grad-reduce, as Megatron does.")
OVERLAP = Knob(
    "megatron_overlap_grad_reduce", "--megatron-overlap-grad-reduce", Kind.FLAG, False,
    "megatron: overlap_grad_reduce=True (--overlap-grad-reduce): buckets reduced during "
    "backward (default off: one bucket per buffer, after backward).")
DISTRIBUTED_OPTIMIZER = Knob(
    "megatron_distributed_optimizer", "--megatron-distributed-optimizer", Kind.FLAG, False,
    "megatron: use_distributed_optimizer=True (--use-distributed-optimizer): padded buckets, "
    "each reduce-scattered.")
GRAD_FP32 = Knob(
    "megatron_grad_reduce_in_fp32", "--megatron-grad-reduce-in-fp32", Kind.FLAG, False,
    "megatron: grad_reduce_in_fp32=True (--accumulate-allreduce-grads-in-fp32): gradients "
    "buffered and reduced in float32.")
BUSBW_PAD = Knob(
    "megatron_pad_buckets_for_high_nccl_busbw", "--megatron-pad-buckets-for-high-nccl-busbw",
    Kind.FLAG, False,
    "megatron: pad_buckets_for_high_nccl_busbw=True: distributed-optimizer buckets end at a "
    "multiple of lcm(dp, 128, 65536).")
EXPERT_DP = Knob(
    "megatron_expert_dp", "--megatron-expert-dp", Kind.COUNT, 0,
    "megatron: ranks of the expert data-parallel group, which pads expert buffers "
    "(0: --gpus).")


@dataclass(frozen=True)
class MegatronOptions(Options):
    """``DistributedDataParallelConfig``'s bucketing fields, as tracecli's flags name them."""

    megatron_bucket_size: int = BUCKET_SIZE.field()
    megatron_overlap_grad_reduce: bool = OVERLAP.field()
    megatron_distributed_optimizer: bool = DISTRIBUTED_OPTIMIZER.field()
    megatron_grad_reduce_in_fp32: bool = GRAD_FP32.field()
    megatron_pad_buckets_for_high_nccl_busbw: bool = BUSBW_PAD.field()
    megatron_expert_dp: int = EXPERT_DP.field()


KNOBS = MegatronOptions.knobs()

MIN_BUCKET = 40_000_000  # max(40000000, 1000000 * dp_group.size())
PER_RANK = 1_000_000
PARAM_ALIGN = 64  # pad_param_start
BUCKET_ALIGN = 128  # pad_bucket_end: lcm(dp, 128)
BUSBW_ALIGN = 2 ** 16


class MegatronBucket(NamedTuple):
    """One bucket of one buffer: its parameters (positions in the list given, in buffer
    order: the reverse of the list's), its element range in the buffer (padding included)
    and its unpadded element count."""

    buffer: int
    members: tuple[int, ...]
    start: int
    end: int
    numel_unpadded: int

    @property
    def numel(self) -> int:
        return self.end - self.start


def _pad(value: int, divisor: int) -> int:
    return -(-value // divisor) * divisor


def megatron_layout(numels: Sequence[int], bucket_size: Optional[int], dp: int,
                    distributed_optimizer: bool = False, pad_for_busbw: bool = False,
                    shared: Optional[Sequence[bool]] = None) -> list[tuple[tuple[int, ...], int, int, int]]:
    """One buffer's buckets, as ``_ParamAndGradBuffer`` lays them out: ``(members, start,
    end, numel_unpadded)`` with members as positions in ``numels`` (the buffer's parameters
    in ``named_parameters()`` order), each bucket's in the reversed walk's order.

    >>> megatron_layout([10, 20, 30, 40], 50, 2)
    [((3, 2), 0, 70, 70), ((1, 0), 70, 100, 30)]
    >>> megatron_layout([10, 20, 30, 40], 50, 2, distributed_optimizer=True)
    [((3, 2), 0, 128, 94), ((1, 0), 128, 256, 74)]
    """
    divisor = math.lcm(dp, BUCKET_ALIGN, BUSBW_ALIGN) if pad_for_busbw else math.lcm(dp, BUCKET_ALIGN)
    buckets = []
    members: list[int] = []
    bucket_start = param_start = param_end = 0

    def close(end: int) -> int:
        nonlocal members, bucket_start
        padded = _pad(end, divisor) if distributed_optimizer else end
        buckets.append((tuple(members), bucket_start, padded, end - bucket_start))
        members, bucket_start = [], padded
        return padded

    for i in reversed(range(len(numels))):
        alone = distributed_optimizer and shared is not None and shared[i]
        if distributed_optimizer:
            param_start = _pad(param_start, PARAM_ALIGN)
        if alone and members:
            param_start = close(param_start)
        param_end = param_start + numels[i]
        members.append(i)
        if (bucket_size is not None and param_end - bucket_start >= bucket_size) or alone:
            param_start = close(param_end)
        else:
            param_start = param_end
    if members:
        close(param_end)
    return buckets


def megatron_bucket_size(opts, dp: int) -> Optional[int]:
    """The ``bucket_size`` DDP uses: the one given, else ``max(40M, 1M x dp)``; ``None``
    (one bucket per buffer) without ``overlap_grad_reduce``."""
    if not opts.megatron_overlap_grad_reduce:
        return None
    return opts.megatron_bucket_size or max(MIN_BUCKET, PER_RANK * dp)


def megatron_buckets(grads: Sequence[Grad], opts, dp: int) -> list[MegatronBucket]:
    """Every buffer's buckets, in bucket-group order (dense buffers, then expert ones, each
    in order of its first parameter); members are positions in ``grads``."""
    expert_dp = opts.megatron_expert_dp or dp
    if all(g.order_known for g in grads):  # named_parameters()
        params = sorted(range(len(grads)), key=lambda i: (grads[i].order, i))
    else:  # its reverse "roughly follows backprop order" (Megatron's comment): readiness
        params = list(reversed(range(len(grads))))
    keys: dict[tuple[str, str, bool], list[int]] = {}
    for i in params:
        g = grads[i]
        grad_dtype = "float32" if opts.megatron_grad_reduce_in_fp32 else g.dtype
        keys.setdefault((g.dtype, grad_dtype, g.meta.expert), []).append(i)
    size = megatron_bucket_size(opts, dp)
    ordered = [k for k in keys if not k[2]] + [k for k in keys if k[2]]
    result = []
    for b, key in enumerate(ordered):
        members = keys[key]
        layout = megatron_layout([_elements(grads[i]) for i in members], size,
                                 expert_dp if key[2] else dp, opts.megatron_distributed_optimizer,
                                 opts.megatron_pad_buckets_for_high_nccl_busbw,
                                 [grads[i].meta.shared_embedding for i in members])
        for positions, start, end, unpadded in layout:
            result.append(MegatronBucket(b, tuple(members[p] for p in positions), start, end,
                                         unpadded))
    return result


def _elements(g: Grad) -> int:
    """The parameter's element count: ``elements``, unless it disagrees with the bytes
    (a trace that recorded no shape: then the bytes over the dtype's size, rounded up)."""
    size = DTYPE_BYTES.get(g.dtype, 4)
    return g.elements if g.elements * size == g.nbytes else -(-g.nbytes // size)


def _grad_dtype(grads: Sequence[Grad], bucket: MegatronBucket, opts) -> str:
    return "float32" if opts.megatron_grad_reduce_in_fp32 else grads[bucket.members[0]].dtype


def megatron(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """Megatron-Core's buckets on ``dp`` = the cost model's ranks (``--gpus``), launched as
    they become ready (all at backward's end without ``overlap_grad_reduce``); each sends its
    padded element count in its grad dtype."""
    dp = cost.gpus if cost is not None else 1
    if dp < 1:
        raise PlanError("--gpus must be at least 1")
    buckets = megatron_buckets(grads, opts, dp)
    ready = [max(grads[i].ready_ms for i in b.members) for b in buckets]
    if opts.megatron_overlap_grad_reduce:  # register_grad_ready: at its last gradient's hook
        order = sorted(range(len(buckets)), key=lambda k: (ready[k], max(buckets[k].members)))
        not_before = None
    else:  # finish_grad_sync: every bucket group once backward is done
        order = list(range(len(buckets)))
        last = max(ready, default=0.0)
        not_before = [last] * len(buckets)
    kind = (CollectiveKind.REDUCE_SCATTER if opts.megatron_distributed_optimizer
            else CollectiveKind.ALL_REDUCE)
    chosen = [buckets[k] for k in order]
    messages = []
    for b in chosen:
        dtype = _grad_dtype(grads, b, opts)
        messages.append((b.numel * DTYPE_BYTES.get(dtype, 4), dtype))
    members = [tuple(sorted(b.members)) for b in chosen]
    unknown = sum(not g.order_known for g in grads)
    notes = () if not unknown else (
        f"{unknown} of {len(grads)} gradients have no place in the model's named_parameters() "
        "order (the sidecar names a profiled gradient only where its shape and dtype are "
        "unique): Megatron's reversed walk is taken as readiness order, which it roughly "
        "follows; its buckets may differ",)
    as_grads = all(m == (sum(grads[i].nbytes for i in b), d) for b, m, d in
                   zip(members, messages, (grads[b[0]].dtype for b in members)))
    return Grouping(members, not_before, [kind] * len(chosen), None if as_grads else messages,
                    notes)


def _packed(head: str, tokens: list[str], width: int = 74) -> list[str]:
    """``head`` and the tokens, space-separated, in lines of at most ``width`` where a
    token allows (continuations indented), so the advice prints whole at 80 columns.

    >>> _packed("f(", ["a=1,", "b=2)"], 8)
    ['f(a=1,', '    b=2)']
    """
    lines, line = [], head
    for token in tokens:
        joined = line + ("" if line.endswith("(") else " ") + token
        if len(joined) > width and line != head:
            lines.append(line)
            line = "    " + token
        else:
            line = joined
    return lines + [line]


def megatron_settings(plan) -> dict[str, Any]:
    """``DistributedDataParallelConfig(...)`` and the Megatron-LM flags for the plan's
    options, in lines that print whole at 80 columns."""
    o = plan.options
    dp = plan.cost.gpus
    size = megatron_bucket_size(o, dp)
    fields, flags = [], []
    if o.megatron_overlap_grad_reduce:
        fields.append("overlap_grad_reduce=True")
        flags.append("--overlap-grad-reduce")
        if o.megatron_bucket_size:
            fields.append(f"bucket_size={o.megatron_bucket_size}")
            flags.append(f"--ddp-bucket-size {o.megatron_bucket_size}")
    for on, field, flag in (
            (o.megatron_distributed_optimizer, "use_distributed_optimizer", "--use-distributed-optimizer"),
            (o.megatron_grad_reduce_in_fp32, "grad_reduce_in_fp32", "--accumulate-allreduce-grads-in-fp32"),
            (o.megatron_pad_buckets_for_high_nccl_busbw, "pad_buckets_for_high_nccl_busbw",
             "--ddp-pad-buckets-for-high-nccl-busbw")):
        if on:
            fields.append(f"{field}=True")
            flags.append(flag)
    if not o.megatron_overlap_grad_reduce:
        note = "# overlap_grad_reduce off: one bucket per buffer, reduced after backward"
    elif not o.megatron_bucket_size:
        note = f"# bucket_size default: max(40M, 1M x {dp} ranks) = {size:,} elements"
    else:
        note = ""
    lines = _packed("DistributedDataParallelConfig(",
                    [f + "," for f in fields[:-1]] + [f + ")" for f in fields[-1:]] or [")"])
    if flags:
        lines += _packed("Megatron-LM:", flags)
    if note:
        lines.append(note)
    return {"framework": "megatron-core", "overlap_grad_reduce": o.megatron_overlap_grad_reduce,
            "bucket_size": size, "use_distributed_optimizer": o.megatron_distributed_optimizer,
            "grad_reduce_in_fp32": o.megatron_grad_reduce_in_fp32,
            "pad_buckets_for_high_nccl_busbw": o.megatron_pad_buckets_for_high_nccl_busbw,
            "text": "\n".join(lines)}


def megatron_tuning(inp, options):
    """``overlap_grad_reduce`` off, and on with every bucket size from 64 Ki elements in
    powers of two up to past the largest buffer, plus the default; the other settings as
    given (they change what is sent, not only how it is grouped)."""
    total = sum(g.elements for g in inp.grads)
    yield replace(options, megatron_overlap_grad_reduce=False, megatron_bucket_size=0)
    yield replace(options, megatron_overlap_grad_reduce=True, megatron_bucket_size=0)
    size = 64 * 1024
    while size < 2 * max(total, 1) and size <= 1 << 31:
        yield replace(options, megatron_overlap_grad_reduce=True, megatron_bucket_size=size)
        size *= 2


SPEC = StrategySpec("megatron", megatron, MegatronOptions, megatron_settings, megatron_tuning,
                    "Megatron-Core DDP", defaults=(BUCKET_SIZE, OVERLAP),
                    setup=(DISTRIBUTED_OPTIMIZER, GRAD_FP32, BUSBW_PAD, EXPERT_DP))
