"""``deepspeed``: DeepSpeed ZeRO's gradient reduction buckets (stages 1, 2 and 3), its
``zero_optimization`` settings and its tuning grid.

Read in DeepSpeed 0.19.8 (``runtime/zero/stage_1_and_2.py``, ``runtime/zero/stage3.py``,
``runtime/zero/config.py``, ``runtime/comm/coalesced_collectives.py``):

- One bucket per communication dtype, as DeepSpeed decides it (:mod:`.deepspeed_comm`:
  ``communication_data_type``, the ``bf16``/``fp16`` configs, ``torch_autocast``'s two
  streams; one in the common case). Gradients enter in gradient-hook
  order (readiness), except stage 1 without ``overlap_comm``, which reduces everything in
  ``reduce_gradients`` after backward, walking the parameter groups in parameter order.
- Stages 1-2 (``reduce_independent_p_g_buckets_and_remove_grads``): *before* adding a
  parameter, ``bucket.elements + numel > reduce_bucket_size`` flushes the bucket (an empty
  flush sends nothing); a parameter past ``reduce_bucket_size`` alone is its own flush.
  Stage 3: the same with ``bucket.elements > 0`` in the test (and empty parameters
  bucketed, which stages 1-2 skip). The end of backward flushes
  what is left, dtypes in ``sort_dtypes`` order (``str(dtype)``).
- What a flush sends. Stages 1-2 (``average_tensor``, default ``reduce_scatter=True`` and
  ``use_multi_rank_bucket_allreduce=True``): the bucket's slices per owner rank, all-reduced
  together in pieces that close after the slice that passes ``reduce_bucket_size``
  (``allreduce_and_scatter``): one all-reduce of the bucket, except a parameter past the size,
  split where its slices (the ZeRO partitions it spans) pass it: several all-reduces, each
  a collective of its own in the plan, its JSON and its cost. Stage 3 (default
  ``reduce_scatter=True``): one reduce-scatter of ``W x sum(ceil(numel / W))`` elements, the
  interleaved padded chunks (``reduce_scatter_coalesced``); ``reduce_scatter=False``: one
  all-reduce of a bucket within the size, but a parameter past it is reduce-scattered all
  the same (its gradient is never copied into the contiguous buffer: ``stage3.py``
  l.1626, l.1673-1678).
- ``overlap_comm`` (default: on for stage 3 only) puts the reductions on a side stream;
  without it they run on the compute stream, in the way of backward: modelled as run after
  backward, which costs the step the same total.

ZeRO-1/2 partitions (the slices of a parameter past the bucket size) follow the parameter
group flattened in parameter order, padded to a multiple of ``2 x dp`` and cut into ``dp``
equal parts (``get_data_parallel_partitions``); one parameter group is assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Optional, Sequence

from ...errors import PlanError
from ...model import CollectiveKind, DTYPE_BYTES
from ..base import Grad, Grouping, Message
from ..spec import Kind, Knob, Options, StrategySpec
from .deepspeed_comm import comm_dtypes, config_name, dtype_named

__all__ = ["deepspeed", "zero_flushes", "ZeroFlush", "deepspeed_settings", "deepspeed_tuning",
           "SPEC", "KNOBS", "DEFAULT_REDUCE_BUCKET", "DeepSpeedOptions"]

DEFAULT_REDUCE_BUCKET = 500_000_000  # reduce_bucket_size, elements (zero/config.py)

STAGE = Knob("deepspeed_stage", "--deepspeed-stage", Kind.COUNT, 2,
             "deepspeed: the ZeRO stage, 1, 2 or 3 (zero_optimization.stage).")
BUCKET = Knob("deepspeed_reduce_bucket_size", "--deepspeed-reduce-bucket-size", Kind.COUNT, 0,
              "deepspeed: reduce_bucket_size in ELEMENTS; 0: DeepSpeed's default, 5e8.")
OVERLAP = Knob("deepspeed_overlap_comm", "--deepspeed-overlap-comm", Kind.TEXT, "auto",
               "deepspeed: overlap_comm true|false|auto (auto: DeepSpeed's default, true for "
               "stage 3 only).")
REDUCE_SCATTER = Knob("deepspeed_no_reduce_scatter", "--deepspeed-no-reduce-scatter", Kind.FLAG,
                      False, "deepspeed: reduce_scatter=false (stage 3 then all-reduces each "
                      "bucket).")
COMM_DTYPE = Knob("deepspeed_communication_data_type", "--deepspeed-communication-data-type",
                  Kind.TEXT, "", "deepspeed: communication_data_type, fp32, fp16 or bf16 (not "
                  "read under --deepspeed-autocast); empty: as DeepSpeed decides it from the "
                  "precision config and the parameter list's comm_dtype marks.")
PRECISION = Knob("deepspeed_precision", "--deepspeed-precision", Kind.TEXT, "auto",
                 "deepspeed: the precision config, fp32 (neither), bf16 (bf16.enabled) or fp16 "
                 "(fp16.enabled), which sets the communication dtype; auto: the parameters' own "
                 "dtype where they share one (float32 where they do not).")
AUTOCAST = Knob("deepspeed_autocast", "--deepspeed-autocast", Kind.TEXT, "",
                "deepspeed: torch_autocast with this dtype (bfloat16 or float16): Linear and Conv "
                "gradients sent in it, as the parameter list's comm_dtype marks say; empty: off.")


@dataclass(frozen=True)
class DeepSpeedOptions(Options):
    """``zero_optimization``'s bucketing fields, as tracecli's flags name them."""

    deepspeed_stage: int = STAGE.field()
    deepspeed_reduce_bucket_size: int = BUCKET.field()
    deepspeed_overlap_comm: str = OVERLAP.field()
    deepspeed_no_reduce_scatter: bool = REDUCE_SCATTER.field()
    deepspeed_communication_data_type: str = COMM_DTYPE.field()
    deepspeed_precision: str = PRECISION.field()
    deepspeed_autocast: str = AUTOCAST.field()


KNOBS = DeepSpeedOptions.knobs()


class ZeroFlush(NamedTuple):
    """One flush of one dtype's bucket: its parameters (positions in the list given, in the
    order they entered), what it sends (a collective and its element count per call) and
    the position of the gradient whose hook flushed it (``None``: the end of backward)."""

    members: tuple[int, ...]
    dtype: str
    sends: tuple[int, ...]
    collective: CollectiveKind
    flushed_by: Optional[int]


def _overlap(opts, stage: int) -> bool:
    value = opts.deepspeed_overlap_comm.lower()
    if value not in ("auto", "true", "false"):
        raise PlanError(f"--deepspeed-overlap-comm must be true, false or auto, not "
                        f"{opts.deepspeed_overlap_comm!r}")
    return stage == 3 if value == "auto" else value == "true"


def _stage(opts) -> int:
    if opts.deepspeed_stage not in (1, 2, 3):
        raise PlanError(f"--deepspeed-stage must be 1, 2 or 3, not {opts.deepspeed_stage}")
    return opts.deepspeed_stage


def _slices(offset: int, numel: int, part: int) -> list[int]:
    """The pieces of a parameter at ``offset`` of the flattened group cut every ``part``."""
    pieces, at, end = [], offset, offset + numel
    while at < end:
        nxt = min(end, (at // part + 1) * part)
        pieces.append(nxt - at)
        at = nxt
    return pieces


def _allreduce_pieces(slices: Sequence[int], size: int) -> tuple[int, ...]:
    """``allreduce_and_scatter``: add a slice, then send if past ``size``; the rest last."""
    sends, acc = [], 0
    for s in slices:
        acc += s
        if acc > size:
            sends.append(acc)
            acc = 0
    return tuple(sends + ([acc] if acc else []))


def zero_flushes(numels: Sequence[int], dtypes: Sequence[str], order: Sequence[int], stage: int,
                 size: int, dp: int, reduce_scatter: bool = True,
                 group_order: Optional[Sequence[int]] = None) -> list[ZeroFlush]:
    """Every flush, in the order DeepSpeed issues them, for parameters of ``numels`` and
    communication ``dtypes`` entering in ``order``; ``group_order``: the parameter group's
    order (ZeRO-1/2 partitions), default ``order``.

    >>> [f.members for f in zero_flushes([4, 4, 4, 9], ["f"] * 4, [0, 1, 2, 3], 2, 8, 2)]
    [(0, 1), (2,), (3,)]
    """
    part_of = {}
    if stage < 3:
        flat = list(group_order if group_order is not None else order)
        total = sum(numels[i] for i in flat)
        padded = -(-total // (2 * dp)) * (2 * dp)
        part, at = max(padded // dp, 1), 0
        for i in flat:
            part_of[i] = at
            at += numels[i]
    buckets: dict[str, list[int]] = {}
    out: list[ZeroFlush] = []

    def flush(dtype: str, by: Optional[int]) -> None:
        members = buckets.pop(dtype, [])
        if not members:
            return  # an empty bucket's flush sends nothing
        elements = sum(numels[i] for i in members)
        if stage == 3 and (reduce_scatter or elements > size):  # past the size: not contiguous
            sends = (dp * sum(-(-numels[i] // dp) for i in members),)
            kind = CollectiveKind.REDUCE_SCATTER
        elif stage < 3 and reduce_scatter and elements > size:  # one parameter past the size
            sends = _allreduce_pieces(_slices(part_of[members[0]], elements, part), size)
            kind = CollectiveKind.ALL_REDUCE
        else:
            sends, kind = (elements,), CollectiveKind.ALL_REDUCE
        out.append(ZeroFlush(tuple(members), dtype, sends, kind, by))

    held: dict[str, int] = {}  # each bucket's elements (summed as it fills: linear time)
    for i in order:
        n = numels[i]
        if n == 0 and stage < 3:  # stage 1-2 skip empty parameters; stage 3 buckets them
            continue
        dtype = dtypes[i]
        if held.get(dtype, 0) + n > size and (stage < 3 or held.get(dtype, 0) > 0):
            flush(dtype, i)
            held[dtype] = 0
        buckets.setdefault(dtype, []).append(i)
        held[dtype] = held.get(dtype, 0) + n
    for dtype in sorted(buckets, key=lambda d: f"torch.{d}"):  # sort_dtypes: by str(dtype)
        flush(dtype, None)
    return out


def _elements(g: Grad) -> int:
    size = DTYPE_BYTES.get(g.dtype, 4)
    return g.elements if g.elements * size == g.nbytes else -(-g.nbytes // size)


def deepspeed(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """ZeRO's flushes on ``dp`` = the cost model's ranks; each launched when the hook that
    flushed it ran (the end of backward for the last, and for every one without
    ``overlap_comm``), in its communication dtype (:mod:`.deepspeed_comm`), a split flush
    as its pieces."""
    stage, dp = _stage(opts), (cost.gpus if cost is not None else 1)
    overlap = _overlap(opts, stage)
    size = opts.deepspeed_reduce_bucket_size or DEFAULT_REDUCE_BUCKET
    dtypes, notes = comm_dtypes(grads, opts, stage)
    by_param = sorted(range(len(grads)), key=lambda i: (grads[i].order, i))
    hooks = by_param if stage == 1 and not overlap else list(range(len(grads)))
    flushes = zero_flushes([_elements(g) for g in grads], dtypes, hooks, stage, size, dp,
                           not opts.deepspeed_no_reduce_scatter, by_param)
    end = max((g.ready_ms for g in grads), default=0.0)
    buckets, not_before, kinds, messages = [], [], [], []
    for f in flushes:
        at = end if f.flushed_by is None or not overlap else grads[f.flushed_by].ready_ms
        buckets.append(sorted(f.members))
        not_before.append(max(at, max(grads[i].ready_ms for i in f.members)))
        kinds.append(f.collective)
        width = DTYPE_BYTES.get(f.dtype, 4)
        messages.append(Message(sum(f.sends) * width, f.dtype,
                                tuple(n * width for n in f.sends) if len(f.sends) > 1 else ()))
    _attach_empty(grads, flushes, buckets, not_before, kinds, messages, end)
    buckets = [tuple(b) for b in buckets]
    same = all(m == (sum(grads[i].nbytes for i in b), grads[b[0]].dtype, ())
               for b, m in zip(buckets, messages))
    notes += _split_notes(grads, flushes)
    if not all(g.order_known for g in grads) and stage == 1 and not overlap:
        notes.append("some gradients have no known place in the model's parameter order: stage 1 "
                     "without overlap_comm walks that order; readiness order taken instead")
    return Grouping(buckets, not_before, kinds, None if same else messages, tuple(notes))


def _split_notes(grads: Sequence[Grad], flushes: list[ZeroFlush]) -> list[str]:
    """What the reader must know of the flushes DeepSpeed sends as several collectives."""
    split = [f for f in flushes if len(f.sends) > 1]
    if not split:
        return []
    shown = "; ".join(f"{grads[f.members[0]].name}: {' + '.join(f'{n:,}' for n in f.sends)}"
                      for f in split[:3])
    return [f"{len(split)} flush(es) of a parameter past reduce_bucket_size sent as several "
            f"all-reduces, the pieces its ZeRO partitions cut ({shown}{'; ...' if len(split) > 3 else ''} "
            "elements), each costed as its own collective"]


def _attach_empty(grads, flushes, buckets, not_before, kinds, messages, end) -> None:
    """Parameters with no elements, which stages 1-2 skip (they send nothing), go with the
    first bucket launched once they are ready, so every gradient has a bucket; a model of
    nothing but empty parameters gets one bucket of nothing (DeepSpeed sends none)."""
    placed = {i for f in flushes for i in f.members}
    for i, g in enumerate(grads):
        if i in placed:
            continue
        k = next((k for k, t in enumerate(not_before) if t >= g.ready_ms), None)
        if k is None:
            buckets.append([])
            not_before.append(end)
            kinds.append(CollectiveKind.ALL_REDUCE)
            messages.append(Message(0, g.dtype))
            k = len(buckets) - 1
        buckets[k] = sorted(buckets[k] + [i])


def deepspeed_settings(plan) -> dict[str, Any]:
    """The ``zero_optimization`` JSON of the plan's options, whole at 80 columns."""
    o = plan.options
    stage = _stage(o)
    fields = [f'"stage": {stage}']
    if o.deepspeed_reduce_bucket_size:
        fields.append(f'"reduce_bucket_size": {o.deepspeed_reduce_bucket_size}')
    if o.deepspeed_overlap_comm.lower() != "auto":
        fields.append(f'"overlap_comm": {o.deepspeed_overlap_comm.lower()}')
    if o.deepspeed_no_reduce_scatter:
        fields.append('"reduce_scatter": false')
    text = '"zero_optimization": {' + ", ".join(fields) + "}"
    if len(text) > 76:
        text = '"zero_optimization": {\n' + ",\n".join("    " + f for f in fields) + "\n}"
    text += "".join(",\n" + line for line in _precision_config(o))
    size = o.deepspeed_reduce_bucket_size or DEFAULT_REDUCE_BUCKET
    return {"framework": "deepspeed", "stage": stage, "reduce_bucket_size": size,
            "overlap_comm": _overlap(o, stage), "reduce_scatter": not o.deepspeed_no_reduce_scatter,
            "text": text}


def _precision_config(o) -> list[str]:
    """The config's precision lines the plan assumed, as DeepSpeed spells them."""
    lines = []
    autocast = dtype_named(o.deepspeed_autocast, "--deepspeed-autocast")
    if autocast:
        lines.append(f'"torch_autocast": {{"enabled": true, "dtype": "{autocast}"}}')
    if o.deepspeed_precision.lower() in ("bf16", "fp16"):
        lines.append(f'"{o.deepspeed_precision.lower()}": {{"enabled": true}}')
    comm = dtype_named(o.deepspeed_communication_data_type, "--deepspeed-communication-data-type")
    if comm:
        lines.append(f'"communication_data_type": "{config_name(comm)}"')
    return lines


def deepspeed_tuning(inp, options):
    """``reduce_bucket_size`` from 64 Ki elements in powers of two past the whole model, and
    the default, with ``overlap_comm`` on; the stage, dtype and reduce-scatter as given
    (they are the user's setup, not a bucket choice)."""
    total = sum(g.elements for g in inp.grads)
    yield replace(options, deepspeed_reduce_bucket_size=0, deepspeed_overlap_comm="true")
    size = 64 * 1024
    while size < 2 * max(total, 1) and size <= 1 << 31:
        yield replace(options, deepspeed_reduce_bucket_size=size, deepspeed_overlap_comm="true")
        size *= 2


SPEC = StrategySpec("deepspeed", deepspeed, DeepSpeedOptions, deepspeed_settings, deepspeed_tuning,
                    "DeepSpeed ZeRO", defaults=(BUCKET, OVERLAP),
                    setup=(STAGE, REDUCE_SCATTER, COMM_DTYPE, PRECISION, AUTOCAST))
