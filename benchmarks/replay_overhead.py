"""Replay overhead: each bucket's all-reduce time inside the replay against a bare loop of
``dist.all_reduce`` on the same buffers, in the same run. Target: within 5%.

    python benchmarks/replay_overhead.py [--ranks 2] [--iters 10] [--backend auto]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tracecli import load_trace
from tracecli.pipeline import ComputeRequest, inputs
from tracecli.planning import StrategyOptions, resolve_cost_model
from tracecli.replay import Launch, ReplayJob, run_replay
from tracecli.replay.launcher import resolve_backend
from tracecli.units import format_size

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("vgg19 ddp", ROOT / "sample_traces" / "vgg19_chainer.txt", ComputeRequest(device="v100"),
     "ddp", StrategyOptions()),
    ("resnet50 size 4MiB", ROOT / "sample_traces" / "resnet50_horovod_tf.txt",
     ComputeRequest(backward_ms=150), "size", StrategyOptions(max_bytes=4 << 20)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    backend, _ = resolve_backend(Launch(args.ranks, args.backend))
    totals = []
    for name, path, compute, strategy, options in CASES:
        _, _, inp = inputs(load_trace(path), compute)
        job = ReplayJob(inp, strategy, options, resolve_cost_model(args.ranks, "10gbe"), "10gbe",
                        args.iters, args.warmup, baseline=True)
        doc = run_replay(job, Launch(args.ranks, backend, 120.0))
        print(f"# {name}: {len(doc['buckets'])} buckets on {args.ranks} ranks ({backend}), "
              f"medians of {args.iters} iterations")
        print(f"{'bucket':>6} {'bytes':>10} {'replay ms':>10} {'bare ms':>9} {'overhead':>9}")
        replay_sum = bare_sum = 0.0
        for b in doc["buckets"]:
            m = b["measured"]
            replay_sum += m["duration_ms"]
            bare_sum += m["bare_allreduce_ms"]
            print(f"{b['index']:>6} {format_size(b['bytes']):>10} {m['duration_ms']:>10.3f} "
                  f"{m['bare_allreduce_ms']:>9.3f} {m['overhead_pct']:>+8.1f}%")
        total = 100.0 * (replay_sum - bare_sum) / bare_sum
        totals.append(total)
        print(f"{'all':>6} {'':>10} {replay_sum:>10.3f} {bare_sum:>9.3f} {total:>+8.1f}%  "
              f"(target within 5%: {'ok' if abs(total) <= 5 else 'MISSED'})")


if __name__ == "__main__":
    main()
