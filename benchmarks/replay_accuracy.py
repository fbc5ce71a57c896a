"""Replay accuracy: calibrate, then replay both samples under 3 strategies on 2 and 4 ranks;
predicted vs measured iteration time. Target: median absolute error under 10% on CPU/gloo
(under 5% on GPU/NCCL).

    python benchmarks/replay_accuracy.py [--ranks 2 4] [--iters 5] [--backend auto]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from tracecli import load_trace
from tracecli.pipeline import ComputeRequest, inputs
from tracecli.planning import StrategyOptions, load_calibration
from tracecli.planning.costmodel import replace_gpus
from tracecli.replay import CalibrationJob, Launch, ReplayJob, Sweep, run_calibration, run_replay
from tracecli.replay.launcher import resolve_backend

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("vgg19", ROOT / "sample_traces" / "vgg19_chainer.txt", ComputeRequest(device="v100")),
    ("resnet50", ROOT / "sample_traces" / "resnet50_horovod_tf.txt", ComputeRequest(backward_ms=150)),
]
STRATEGIES = [("ddp", StrategyOptions()), ("size 4MiB", StrategyOptions(max_bytes=4 << 20)),
              ("optimal", StrategyOptions())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    errors = []
    print(f"{'ranks':>5} {'trace':<9} {'strategy':<10} {'buckets':>7} {'predicted ms':>12} "
          f"{'measured ms':>11} {'p90 ms':>9} {'error':>7}")
    for ranks in args.ranks:
        backend, _ = resolve_backend(Launch(ranks, args.backend))
        sweep = Sweep(min_bytes=4096, max_bytes=512 << 20, points=10, warmup=1, iters=3)
        profile = run_calibration(CalibrationJob(sweep), Launch(ranks, backend, 120.0))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(profile, f)
        cost = load_calibration(f.name)
        print(f"# {ranks} ranks, {backend}: calibrated alpha {profile['alpha_us']:.1f} us, bus "
              f"bandwidth {profile['bandwidth_gbps']:.3f} GB/s, R² {profile['fit']['r2']:.4f}, "
              f"MAPE {profile['fit']['mape_pct']:.1f}%", flush=True)
        for name, path, compute in CASES:
            _, _, inp = inputs(load_trace(path), compute)
            for label, options in STRATEGIES:
                strategy = label.split()[0]
                job = ReplayJob(inp, strategy, options, replace_gpus(cost, ranks), "calibration",
                                args.iters, args.warmup)
                doc = run_replay(job, Launch(ranks, backend, 120.0))
                errors.append(abs(doc["error_pct"]))
                print(f"{ranks:>5} {name:<9} {label:<10} {len(doc['buckets']):>7} "
                      f"{doc['predicted']['iteration_ms']:>12.1f} {doc['measured']['iteration_ms']:>11.1f} "
                      f"{doc['measured']['iteration_p90_ms']:>9.1f} {doc['error_pct']:>+6.1f}%"
                      + ("" if doc["replay"]["verified"] else "  NOT VERIFIED"), flush=True)
    target = 5.0 if backend == "nccl" else 10.0
    median = statistics.median(errors)
    print(f"median absolute error {median:.1f}% over {len(errors)} replays "
          f"(target < {target:g}% on {backend}): {'ok' if median < target else 'MISSED'}")
    sys.exit(0)


if __name__ == "__main__":
    main()
