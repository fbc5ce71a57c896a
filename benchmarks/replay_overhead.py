"""Replay overhead: what the replay adds to each bucket's collective.

For every bucket, in one run on the same buffers:

- ``in replay``: its duration inside the replayed step (slowest rank; 10%-trimmed mean of
  the timed iterations, the statistic calibration takes too);
- ``same way``: the same size measured by the in-place calibration in the conditions the
  bucket met in the replay: launched alone after idle, or queued right behind the bucket
  before it (the replay's prediction for it rests on exactly this measurement);
- ``bare``: a plain loop of blocking collectives after a barrier (``--baseline``), the
  transport at its hottest, for reference.

tracecli's own overhead is ``in replay`` against ``same way`` (target within 5%); ``bare``
shows how much the transport itself depends on how it is driven (idle vs busy).

    python benchmarks/replay_overhead.py [--ranks 2] [--iters 20] [--backend auto]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tracecli import load_trace
from tracecli.pipeline import ComputeRequest, inputs
from tracecli.replay import Ranks, ReplayJob, Sweep, run_replay
from tracecli.replay.processes import resolve_backend
from tracecli.units import format_size

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("vgg19 ddp", ROOT / "sample_traces" / "vgg19_chainer.txt", ComputeRequest(device="v100"),
     "ddp", {}),
    ("resnet50 size 4MiB", ROOT / "sample_traces" / "resnet50_horovod_tf.txt",
     ComputeRequest(backward_ms=150), "size", dict(max_bytes=4 << 20)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    backend, _ = resolve_backend(Ranks(args.ranks, args.backend))
    for name, path, compute, strategy, options in CASES:
        _, _, inp = inputs(load_trace(path), compute)
        job = ReplayJob(inp, strategy, options, None, "in-place calibration", args.iters,
                        args.warmup, sweep=Sweep.covering(sum(g.nbytes for g in inp.grads)),
                        baseline=True)
        doc = run_replay(job, Ranks(args.ranks, backend, 120.0)).to_json()
        print(f"# {name}: {len(doc['buckets'])} buckets on {args.ranks} ranks ({backend}), "
              f"{args.iters} iterations")
        print(f"{'bucket':>6} {'bytes':>10} {'started':>8} {'in replay':>10} {'same way':>9} "
              f"{'overhead':>9} {'bare':>8}")
        replay_sum = same_sum = bare_sum = 0.0
        previous_end = None
        for b in doc["buckets"]:
            m = b["measured"]
            queued = previous_end is not None and b["ready_ms"] <= previous_end
            previous_end = b["end_ms"]
            replay_sum += m["mean_duration_ms"]
            same_sum += b["duration_ms"]
            bare_sum += m["bare_allreduce_ms"]
            print(f"{b['index']:>6} {format_size(b['bytes']):>10} {'queued' if queued else 'alone':>8} "
                  f"{m['mean_duration_ms']:>10.3f} {b['duration_ms']:>9.3f} "
                  f"{100.0 * (m['mean_duration_ms'] - b['duration_ms']) / b['duration_ms']:>+8.1f}% "
                  f"{m['bare_allreduce_ms']:>8.3f}")
        total = 100.0 * (replay_sum - same_sum) / same_sum
        print(f"{'all':>6} {'':>10} {'':>8} {replay_sum:>10.3f} {same_sum:>9.3f} {total:>+8.1f}% "
              f"{bare_sum:>8.3f}   tracecli's overhead (target within 5%): "
              f"{'ok' if abs(total) <= 5 else 'MISSED'}; transport idle vs hot: "
              f"{100.0 * (same_sum - bare_sum) / bare_sum:+.1f}%")


if __name__ == "__main__":
    main()
