"""Replay accuracy: predicted against measured, for both samples under three strategies on 2
and 4 ranks, each replay calibrating in place (the default: the plan's own bucket sizes
measured on its own buffers, in the replay's conditions).

For every replay: predicted and measured iteration (median over the timed iterations) and
its error; per bucket, predicted and measured duration and start (medians, slowest rank)
and their errors; the in-place calibration's quality. Then the median and worst absolute
iteration error over all replays. Target on a quiet machine: median under 5%, worst
under 10%.

A quiet machine: nothing else running (check ``uptime``), one benchmark at a time; the
``--repeat`` option runs the whole set again and reports each pass, so a noisy pass shows.

    python benchmarks/replay_accuracy.py [--ranks 2 4] [--iters 20] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from tracecli import load_trace
from tracecli.pipeline import ComputeRequest, inputs
from tracecli.replay import Ranks, ReplayJob, Sweep, run_replay
from tracecli.replay.processes import resolve_backend

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("vgg19", ROOT / "sample_traces" / "vgg19_chainer.txt", ComputeRequest(device="v100")),
    ("resnet50", ROOT / "sample_traces" / "resnet50_horovod_tf.txt", ComputeRequest(backward_ms=150)),
]
STRATEGIES = [("ddp", "ddp", {}),
              ("size 25MiB", "size", dict(max_bytes=25 << 20)),
              ("optimal", "optimal", {})]


def one_pass(ranks_list, iters: int, warmup: int, backend_name: str, detail: bool) -> list[float]:
    errors = []
    print(f"{'ranks':>5} {'trace':<9} {'strategy':<11} {'buckets':>7} {'predicted':>10} "
          f"{'measured':>9} {'p90':>8} {'error':>7} {'bucket err med/worst':>21}  calibration")
    for ranks in ranks_list:
        backend, _ = resolve_backend(Ranks(ranks, backend_name))
        for name, path, compute in CASES:
            _, _, inp = inputs(load_trace(path), compute)
            for label, strategy, options in STRATEGIES:
                job = ReplayJob(inp, strategy, options, None, "in-place calibration", iters, warmup,
                                sweep=Sweep.covering(sum(g.nbytes for g in inp.grads)))
                doc = run_replay(job, Ranks(ranks, backend, 120.0)).to_json()
                errors.append(abs(doc["error_pct"]))
                bucket_errors = [100.0 * (b["measured"]["duration_ms"] - b["duration_ms"]) / b["duration_ms"]
                                 for b in doc["buckets"] if b["duration_ms"] > 0]
                cal = doc["replay"]["calibration"]
                med = statistics.median(abs(e) for e in bucket_errors)
                worst = max(bucket_errors, key=abs)
                print(f"{ranks:>5} {name:<9} {label:<11} {len(doc['buckets']):>7} "
                      f"{doc['predicted']['iteration_ms']:>10.1f} {doc['measured']['iteration_ms']:>9.1f} "
                      f"{doc['measured']['iteration_p90_ms']:>8.1f} {doc['error_pct']:>+6.1f}% "
                      f"{med:>9.1f}% / {worst:>+7.1f}%  {len(cal['points'])} sizes, R² {cal['r2']:.3f}, "
                      f"MAPE {cal['mape_pct']:.1f}%" + ("" if doc["replay"]["verified"] else "  NOT VERIFIED"),
                      flush=True)
                if detail:
                    for b in doc["buckets"]:
                        m = b["measured"]
                        print(f"      bucket {b['index']:>3} {b['bytes'] / 2**20:>9.2f} MiB  start "
                              f"{b['start_ms']:>8.2f} / {m['start_ms']:>8.2f}  comm {b['duration_ms']:>8.3f} / "
                              f"{m['duration_ms']:>8.3f} ms ({b.get('cost_basis', '-')})")
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--detail", action="store_true", help="every bucket: predicted / measured")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at the start")
    for k in range(args.repeat):
        errors = one_pass(args.ranks, args.iters, args.warmup, args.backend, args.detail)
        median, worst = statistics.median(errors), max(errors)
        ok = median < 5.0 and worst < 10.0
        print(f"pass {k + 1}: |iteration error| median {median:.1f}%, worst {worst:.1f}% over "
              f"{len(errors)} replays (target median < 5%, worst < 10%): {'ok' if ok else 'MISSED'}")
    sys.exit(0)


if __name__ == "__main__":
    main()
