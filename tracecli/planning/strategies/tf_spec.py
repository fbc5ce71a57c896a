"""``tf-spec``: tf_cnn_benchmarks' ``--all_reduce_spec`` parts and ``pack_small_tensors``,
its command-line settings and its tuning grid."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Sequence

from ...errors import PlanError
from ..base import Grad, Grouping
from ..spec import Kind, Knob, Options, StrategySpec, cap_candidates

__all__ = ["tf_spec", "parse_all_reduce_spec", "pack_small_tensors", "extract_ranges", "SpecPart",
           "tf_spec_settings", "tf_spec_tuning", "SPEC_TEXT", "AGG_MAX_BYTES", "AGG_MAX_GROUP",
           "SPEC", "TfSpecOptions"]

SPEC_TEXT = Knob("spec", "--spec", Kind.TEXT, "nccl",
                 "tf-spec: tf_cnn_benchmarks --all_reduce_spec, e.g. pscpu:32k:xring "
                 "(limits in elements).")
AGG_MAX_BYTES = Knob("agg_small_grads_max_bytes", "--agg-small-grads-max-bytes",
                     Kind.BYTES_OR_ZERO, 0,
                     "tf-spec: pack float32 gradients up to this many bytes (0: off).")
AGG_MAX_GROUP = Knob("agg_small_grads_max_group", "--agg-small-grads-max-group", Kind.COUNT, 10,
                     "tf-spec: longest packed range - 2.")


@dataclass(frozen=True)
class TfSpecOptions(Options):
    spec: str = SPEC_TEXT.field()  # --all_reduce_spec
    agg_small_grads_max_bytes: int = AGG_MAX_BYTES.field()
    agg_small_grads_max_group: int = AGG_MAX_GROUP.field()


class SpecPart(NamedTuple):
    alg: str
    shards: int
    limit: int  # element count; -1 for the last part


_SPEC_ALGS = ("nccl", "nccl/xring", "nccl/rechd", "nccl/pscpu", "xring", "pscpu", "psgpu",
              "pscpu/pscpu", "collective")


def _general_int(text: str, spec: str) -> int:
    match = re.fullmatch(r"(\d+)([KkMGT]?)", text)
    if not match:
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        raise PlanError(f"all-reduce spec {spec!r} has a non-integer range "
                        f"{text!r}; limits are element counts with k/K, M, G, T suffixes")
    scale = {"": 1, "k": 1024, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    return int(match.group(1)) * scale[match.group(2)]


def parse_all_reduce_spec(spec: str) -> list[SpecPart]:
    """tf_cnn_benchmarks' ``parse_all_reduce_spec``: ``alg[#shards](:limit:alg[#shards])*``.

    >>> parse_all_reduce_spec("pscpu:32k:xring")
    [SpecPart(alg='pscpu', shards=1, limit=32768), SpecPart(alg='xring', shards=1, limit=-1)]
    >>> parse_all_reduce_spec("nccl#2")
    [SpecPart(alg='nccl', shards=2, limit=-1)]
    """
    parts = spec.split(":") + ["-1"]
    if len(parts) % 2:
        raise PlanError(f"all-reduce spec {spec!r} is malformed: it needs "
                        "alg(:limit:alg)*, e.g. pscpu:32k:xring")
    result = []
    alg, shards = "", 1
    for i, part in enumerate(parts):
        if i % 2:
            result.append(SpecPart(alg, shards, _general_int(part, spec)))
            continue
        alg, _, shard_text = part.partition("#")
        shards = 1
        if shard_text:
            if not shard_text.isdigit():
                raise PlanError(f"all-reduce spec {spec!r} has non-integer "
                                f"shards {shard_text!r}")
            shards = int(shard_text)
        if alg not in _SPEC_ALGS:
            raise PlanError(f"all-reduce spec {spec!r} has invalid alg {alg!r}; "
                            "use one of " + ", ".join(_SPEC_ALGS))
    return result


def extract_ranges(indices: Sequence[int], range_size_limit: int) -> tuple[list[list[int]], list[int]]:
    """tf_cnn_benchmarks' ``extract_ranges``: consecutive runs and singles."""
    if not indices:
        return [], []
    first = last = indices[0]
    ranges, singles = [], []
    for i in indices[1:]:
        if i == last + 1 and (last - first) <= range_size_limit:
            last = i
        else:
            if last > first:
                ranges.append([first, last])
            else:
                singles.append(first)
            first = last = i
    if last > first:
        ranges.append([first, last])
    else:
        singles.append(first)
    return ranges, singles


def pack_small_tensors(elements: Sequence[int], dtypes: Sequence[str], max_bytes: int,
                       max_group: int) -> list[tuple[int, ...]]:
    """tf_cnn_benchmarks' ``pack_small_tensors``: groups of positions, packed ranges first.

    >>> pack_small_tensors([8, 9, 12, 125], ["float32"] * 4, 40, 10)
    [(0, 1), (2,), (3,)]
    >>> pack_small_tensors([125, 6, 5, 7, 100], ["float32"] * 5, 40, 10)
    [(1, 2, 3), (0,), (4,)]
    """
    if max_bytes <= 0 or max_group <= 0:
        return [(i,) for i in range(len(elements))]
    small = [i for i, (n, d) in enumerate(zip(elements, dtypes)) if d == "float32" and 4 * n <= max_bytes]
    large = [i for i, (n, d) in enumerate(zip(elements, dtypes)) if not (d == "float32" and 4 * n <= max_bytes)]
    ranges, singles = extract_ranges(small, max_group)
    if not ranges:
        return [(i,) for i in range(len(elements))]
    return [tuple(range(a, b + 1)) for a, b in ranges] + [(i,) for i in sorted(large + singles)]


def tf_spec(grads: Sequence[Grad], opts, cost=None) -> Grouping:
    """Spec parts split the gradients (in variable order) by element count; within each part
    small float32 gradients are packed. Each group is one all-reduce, launched when its
    last gradient is ready, as TensorFlow's dataflow runs it."""
    spec = parse_all_reduce_spec(opts.spec)
    remaining = sorted(range(len(grads)), key=lambda i: grads[i].order)
    groups: list[tuple[int, ...]] = []
    for part in spec:
        if part.limit < 0:
            this, remaining = remaining, []
        else:
            this = [i for i in remaining if grads[i].elements <= part.limit]
            remaining = [i for i in remaining if grads[i].elements > part.limit]
        packed = pack_small_tensors([grads[i].elements for i in this],
                                    [grads[i].dtype for i in this],
                                    opts.agg_small_grads_max_bytes, opts.agg_small_grads_max_group)
        groups += [tuple(sorted(this[k] for k in group)) for group in packed]
    groups.sort(key=lambda g: (max(g), g))
    return Grouping(groups)



def tf_spec_settings(plan) -> dict[str, Any]:
    """``--all_reduce_spec=...`` (and the packing flags when packing is on)."""
    o = plan.options
    text = f"--all_reduce_spec={o.spec}"
    if o.agg_small_grads_max_bytes > 0:
        text += (f" --agg_small_grads_max_bytes={o.agg_small_grads_max_bytes}"
                 f" --agg_small_grads_max_group={o.agg_small_grads_max_group}")
    return {"framework": "tf_cnn_benchmarks", "all_reduce_spec": o.spec,
            "agg_small_grads_max_bytes": o.agg_small_grads_max_bytes,
            "agg_small_grads_max_group": o.agg_small_grads_max_group, "text": text}


def tf_spec_tuning(inp, options):
    """The spec given, with packing off or up to each candidate size x group lengths."""
    for b in [0] + cap_candidates(inp.grads):
        for g in (4, 10, 16, 32, 64, 128):
            yield replace(options, spec=options.spec, agg_small_grads_max_bytes=b,
                          agg_small_grads_max_group=g)


SPEC = StrategySpec("tf-spec", tf_spec, TfSpecOptions, tf_spec_settings, tf_spec_tuning,
                    "tf_cnn_benchmarks", frameworks=("tensorflow",))
