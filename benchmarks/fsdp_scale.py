"""FSDP planning scale (issue 27): a 1,000-unit FSDP2 model's trace planned
(``--strategy fsdp2``) and tuned (``--compare``: every strategy, FSDP2's wrapping,
resharding and prefetch grid) by the command line, under 5 s each.

The trace is synthetic (``tests/fsdp_synthetic.py``: FSDP2's labels, ops and argument
layouts as the real fixtures have them) for 1,000 transformer blocks of 7 parameters on 8
ranks: 7,003 gradients, 3,002 collectives. Each figure is the median wall time of three runs
of the whole command (start-up, reading the trace, planning, output).

    python benchmarks/fsdp_scale.py [--blocks 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from fsdp_synthetic import write_trace  # noqa: E402

TARGET_S = 5.0


def timed(args: list[str], runs: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "tracecli", *args], env=env,
                              capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode:
            raise SystemExit(f"tracecli {' '.join(args)} failed: {done.stderr.strip()}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(Path(tmp) / f"fsdp2_{args.blocks}.json.gz", args.blocks, world=8)
        print(f"synthetic FSDP2 trace: {args.blocks} blocks + root on 8 ranks, "
              f"{trace.stat().st_size / 1e6:.1f} MB gzipped")
        rows = [("plan-buckets --strategy fsdp2 --json", ["--strategy", "fsdp2", "--json"]),
                ("plan-buckets --strategy fsdp2 (table)", ["--strategy", "fsdp2"]),
                ("plan-buckets --compare --json", ["--compare", "--json"]),
                ("plan-buckets --compare (table, advice)", ["--compare"]),
                ("plan-buckets --compare --memory-gib 1", ["--compare", "--memory-gib", "1"])]
        worst = 0.0
        for label, extra in rows:
            s = timed(["plan-buckets", str(trace), *extra], args.runs)
            worst = max(worst, s)
            print(f"  {label:42s} {s:6.2f} s")
        verdict = "meets" if worst < TARGET_S else "MISSES"
        print(f"slowest {worst:.2f} s: {verdict} the {TARGET_S:g} s target")


if __name__ == "__main__":
    main()
