"""Kineto scale: ``tracecli inspect --json`` on a ~200 MB PyTorch profiler trace.

The trace is a real one (``tests/fixtures/kineto/mlp_default.json.gz``, DDP on 2 gloo
ranks) with its profiled steps repeated, timestamps shifted and ``ProfilerStep#K``
renumbered, until the JSON reaches ``--mb`` megabytes; a gzipped copy is measured too.
Each run is a fresh ``tracecli`` process; wall time and its peak RSS are reported.
Target: peak memory well under 2 GB.

    python benchmarks/kineto_scale.py [--mb 200] [--repeat 3] [--source TRACE.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "kineto" / "mlp_default.json.gz"


def make_trace(path: Path, megabytes: int, source: Path = SOURCE) -> int:
    doc = json.loads(gzip.decompress(source.read_bytes()))
    events = [e for e in doc.pop("traceEvents")]
    timed = [e for e in events if e.get("ph") == "X"]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - start + 1000.0
    per_copy = len(json.dumps(events)) + 1
    copies = max(1, megabytes * 1_000_000 // per_copy)
    steps = 0
    with path.open("w") as out:
        head = json.dumps(doc)[:-1]
        out.write(head + ', "traceEvents": [\n')
        first = True
        for k in range(copies):
            shift = k * span
            for e in events:
                e2 = dict(e)
                if "ts" in e2 and isinstance(e2["ts"], (int, float)):
                    e2["ts"] = round(e2["ts"] + shift, 3)
                if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{steps}"
                    steps += 1
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + k * 1_000_000
                out.write(("" if first else ",\n") + json.dumps(e2))
                first = False
        out.write("\n]}\n")
    return steps


def measure(path: Path) -> tuple[float, float, int]:
    """(seconds, peak MB, bytes of JSON output) of one ``tracecli inspect --json`` run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "tracecli", "inspect", str(path), "--json"],
                         capture_output=True, check=True)
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    json.loads(out.stdout)
    return seconds, max(peak, before) / 1024, len(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--source", type=Path, default=SOURCE,
                        help="the trace to repeat (tests/fixtures/kineto_modules/mlp.json.gz: "
                        "one recorded with module scopes, with_stack=True)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "big.json"
        steps = make_trace(plain, args.mb, args.source)
        packed = Path(tmp) / "big.json.gz"
        with plain.open("rb") as src, gzip.open(packed, "wb", compresslevel=3) as dst:
            dst.write(src.read())
        print(f"{'file':<12} {'MB':>7} {'steps':>7} {'best s':>7} {'median s':>9} {'peak MB':>8}"
              "  target: peak well under 2048 MB")
        for path in (plain, packed):
            runs = sorted(measure(path) for _ in range(args.repeat))
            best, median = runs[0][0], runs[len(runs) // 2][0]
            peak = max(r[1] for r in runs)
            print(f"{path.name:<12} {path.stat().st_size / 1e6:>7.1f} {steps:>7,} {best:>7.2f} "
                  f"{median:>9.2f} {peak:>8.0f}  {'ok' if peak < 2048 else 'MISSED'}")
    print("peak MB is the largest resident set of any tracecli process measured (ru_maxrss).")


if __name__ == "__main__":
    main()
