"""The strategy options: which strategy groups gradients into buckets, and its knobs.

Kept apart so they can be generated from the strategy specs: ``strategy_options`` declares
them, ``STRATEGY_KEYS`` names them (the session remembers them with a plan, ``replay``
asks whether any was given) and ``strategy_from`` makes the library's options of them.
"""

from __future__ import annotations

import click

from ..planning import STRATEGIES, StrategyOptions
from ..planning.asrun import AS_RUN
from .types import POSITIVE_SIZE, SIZE, Number, options

__all__ = ["strategy_options", "STRATEGY_KEYS", "strategy_from"]

strategy_options = options(
    click.option("--strategy", type=click.Choice(list(STRATEGIES) + [AS_RUN]), default="size",
                 show_default=True, help="How to group gradients into buckets (observed: the "
                 "buckets a profiled run used, with its measured times)."),
    click.option("--max-bytes", type=POSITIVE_SIZE, help="Bucket cap in bytes: size and ddp "
                 "(DDP's bucket_cap_mb, default 25 MiB), horovod (HOROVOD_FUSION_THRESHOLD, "
                 "default 128 MiB), optimal (optional cap). 32k or 32KiB = 32,768 bytes; "
                 "32KB = 32,000; also M/MiB/MB, G/GiB/GB."),
    click.option("--first-bucket-bytes", type=POSITIVE_SIZE, help="ddp: first bucket cap in bytes "
                 "(default as torch: 1 MiB unless --max-bytes is given, then the same)."),
    click.option("--cycle-ms", type=Number(0, 1e6, "ms", low_open=True), default=1.0,
                 show_default=True, help="horovod: HOROVOD_CYCLE_TIME, ms."),
    click.option("--spec", default="nccl", show_default=True,
                 help="tf-spec: tf_cnn_benchmarks --all_reduce_spec, e.g. pscpu:32k:xring "
                 "(limits in elements)."),
    click.option("--agg-small-grads-max-bytes", type=SIZE, default=0, show_default=True,
                 help="tf-spec: pack float32 gradients up to this many bytes (0: off)."),
    click.option("--agg-small-grads-max-group", type=click.IntRange(min=0), default=10,
                 show_default=True, help="tf-spec: longest packed range - 2."),
    click.option("--sparse-as-dense", is_flag=True, help="Fuse sparse gradients (embeddings) "
                 "into all-reduce buckets as dense, as Horovod's sparse_as_dense=True does "
                 "(default: each is all-gathered on its own)."),
)

STRATEGY_KEYS = ("strategy", "max_bytes", "first_bucket_bytes", "cycle_ms", "spec",
                 "agg_small_grads_max_bytes", "agg_small_grads_max_group", "sparse_as_dense")


def strategy_from(kw) -> StrategyOptions:
    return StrategyOptions(kw["max_bytes"], kw["first_bucket_bytes"], kw["cycle_ms"], kw["spec"],
                           kw["agg_small_grads_max_bytes"], kw["agg_small_grads_max_group"],
                           sparse_as_dense=kw["sparse_as_dense"])
