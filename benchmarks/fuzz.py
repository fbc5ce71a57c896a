"""Fuzz campaign: 100,000 seeded mutants of every input format against tracecli's contract.

Each mutant of a trace (Chainer dump, op list and its sidecar, profiler trace, one with
module scopes), a plan
file, a timing file or a calibration profile goes through the commands that read it.
The contract: exit 0 with valid JSON, or exit 2 with one line naming the file; never
exit 1, never more than 10 s, never more than 1 GB. Workers run in parallel, each a fresh
process under an address-space limit; the summary prints the figures and any breach.

    python benchmarks/fuzz.py [--count 100000] [--seed 0] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "fuzzing.py"
KINDS = ["chainer", "tf-schedule", "kineto", "kineto-modules", "plan", "op-times", "calibration",
         "nccl-tests", "nccl-tests-json", "nccl-log", "run"]


def batch(seed: int, count: int) -> dict:
    out = subprocess.run([sys.executable, str(WORKER), "--count", str(count), "--seed", str(seed),
                          "--kinds", *KINDS], capture_output=True, text=True)
    if out.returncode != 0:
        return {"mutants": count, "runs": 0, "failed": count, "slowest_s": 0, "peak_mb": 0,
                "failures": [{"problem": out.stderr[-2000:]}]}
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=5000)
    args = parser.parse_args()
    sizes = [min(args.batch, args.count - k) for k in range(0, args.count, args.batch)]
    started = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(batch, [args.seed * 1_000_003 + i for i in range(len(sizes))], sizes))
    seconds = time.perf_counter() - started
    failures = [f for r in results for f in r["failures"]]
    print(f"mutants {sum(r['mutants'] for r in results):,} ({', '.join(KINDS)}), command runs "
          f"{sum(r['runs'] for r in results):,}, in {seconds:.0f} s")
    print(f"contract breaches: {sum(r['failed'] for r in results)}")
    print(f"slowest run: {max(r['slowest_s'] for r in results):.3f} s (limit 10 s); largest worker "
          f"peak: {max(r['peak_mb'] for r in results):.0f} MB (limit 1024 MB)")
    for f in failures[:10]:
        print("-", f.get("kind"), f.get("args"), f["problem"][:500])
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
