"""Multi-rank scale: ``tracecli inspect RUN --json`` on 64 ranks of ~20 MB each.

The run is made by ``benchmarks/multirank_input.py`` where it exists (one real rank trace
inflated to ``--mb`` and copied to ``--ranks`` ranks), else here the same way: rank 0 of the
real fixture ``tests/fixtures/multirank/gloo4_straggler_offsets`` with its profiled steps
repeated (timestamps shifted, ``ProfilerStep#K`` renumbered) to ``--mb`` megabytes, then one
copy per rank with its ``distributedInfo.rank``.

Each measurement is a fresh ``tracecli`` process. Reported: wall time of one rank alone and
of the whole run; the target ``(ranks / cores) x one rank's time x 1.25``; peak memory of the
largest single process (the CLI or one of its parser workers) and the peak of the whole
process tree summed (sampled from /proc every 20 ms), for a run of ``--small`` ranks and of
``--ranks`` ranks: under 1.5 GB, and each added rank adds only its kept records (steps and
collectives, at most 5% of its trace's size), not its trace.

Then what ``--estimate`` ranks (default 1,024, the most a run may hold) would take, by the
measured slope between the ``--small`` and the ``--ranks`` run: seconds and memory per added
rank.

    python benchmarks/multirank_scale.py [--ranks 64] [--mb 20] [--small 8] [--estimate 1024]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "multirank" / "gloo4_straggler_offsets" / "rank-0.json.gz"
TARGET_FACTOR = 1.25
MEMORY_LIMIT_MB = 1536
GROWTH_FRACTION = 0.05  # what a rank adds to the peak, at most, as a share of its trace


def inflate(path: Path, megabytes: float, world: int) -> int:
    """Rank 0's trace of about ``megabytes`` MB in a world of ``world``: the source's steps
    repeated."""
    doc = json.loads(gzip.decompress(SOURCE.read_bytes()))
    info = doc["distributedInfo"]
    info["world_size"] = world
    for group in info.get("pg_config", []):
        group.update(pg_size=world, ranks=list(range(world)))
    events = doc.pop("traceEvents")
    timed = [e for e in events if e.get("ph") == "X"]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - start + 1000.0
    copies = max(1, int(megabytes * 1e6) // (len(json.dumps(events)) + 1))
    step = 0
    with path.open("w") as out:
        out.write(json.dumps(doc)[:-1] + ', "traceEvents": [\n')
        first = True
        for k in range(copies):
            for e in events:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = round(e2["ts"] + k * span, 3)
                if str(e2.get("name", "")).startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{step}"
                    step += 1
                if isinstance(e2.get("id"), int):
                    e2["id"] += k * 1_000_000
                out.write(("" if first else ",\n") + json.dumps(e2))
                first = False
        out.write("\n]}\n")
    return step


def make_run(directory: Path, ranks: int, megabytes: float) -> None:
    """``ranks`` files ``rank{r}.json`` in ``directory`` (multirank_input.py's, if any)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import multirank_input  # noqa: PLC0415 - the peer benchmark's input, when present
    except ImportError:
        multirank_input = None
    if multirank_input is not None and hasattr(multirank_input, "make_run"):
        multirank_input.make_run(directory, ranks, megabytes, jobs=os.cpu_count() or 1)
        return
    directory.mkdir(parents=True, exist_ok=True)
    first = directory / "rank0.json"
    inflate(first, megabytes, ranks)
    text = first.read_text()
    marker = '"rank": 0,'
    assert marker in text[:65536], "the source trace names its rank in distributedInfo"
    head, tail = text[:65536], text[65536:]
    for r in range(1, ranks):
        (directory / f"rank{r}.json").write_text(head.replace(marker, f'"rank": {r},', 1) + tail)


def _tree_rss_kb(pid: int) -> int:
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


# runs the command and says, last on stderr, the peak RSS (KB) of its largest process: the
# CLI or any of its parser workers (each reaped, so counted in RUSAGE_CHILDREN)
_WRAPPER = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
            "sys.exit(r.returncode)")


def measure(path: Path) -> dict:
    """One ``tracecli inspect PATH --json``: seconds, largest process and summed tree peak (MB)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _WRAPPER, sys.executable, "-m", "tracecli",
                             "inspect", str(path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=path.parent)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - t
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"tracecli failed: {err.decode()[-2000:]}")
    doc = json.loads(out)
    largest = int(err.decode().strip().splitlines()[-1])
    return {"seconds": seconds, "largest_mb": largest / 1024,
            "tree_mb": peak[0] / 1024, "ranks": len(doc["ranks"]),
            "collectives": len(doc["collectives"]), "offsets": doc["clock_offset_us"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--small", type=int, default=8)
    parser.add_argument("--estimate", type=int, default=1024,
                        help="ranks to estimate the time and memory of, by the measured slope")
    parser.add_argument("--dir", help="where to write the run (default: a temporary directory)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        big = Path(tmp) / "run"
        t = time.perf_counter()
        make_run(big, args.ranks, args.mb)
        files = sorted((f for f in big.iterdir() if f.name != "run.json"),
                       key=lambda f: int("".join(c for c in f.name if c.isdigit()) or 0))
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"made {len(files)} rank traces, {size:,.0f} MB in all, in "
              f"{time.perf_counter() - t:.1f} s; {cores} cores")
        one = Path(tmp) / "one"
        one.mkdir()
        os.symlink(files[0], one / files[0].name)
        small = Path(tmp) / "small"
        small.mkdir()
        for f in files[:args.small]:
            os.symlink(f, small / f.name)
        alone = min((measure(one) for _ in range(2)), key=lambda m: m["seconds"])
        few = measure(small)
        run = measure(big)
        _report(args, cores, files, big, alone, few, run)


def _report(args, cores: int, files: list, big: Path, alone: dict, few: dict, run: dict) -> None:
    """The figures: each run's time and memory, against the targets, and the estimate."""
    target = (args.ranks / cores) * alone["seconds"] * TARGET_FACTOR
    print(f"one rank ({files[0].stat().st_size / 1e6:.1f} MB): {alone['seconds']:.2f} s, "
          f"peak {alone['largest_mb']:.0f} MB")
    print(f"{args.small} ranks: {few['seconds']:.2f} s, largest process "
          f"{few['largest_mb']:.0f} MB, whole tree {few['tree_mb']:.0f} MB")
    print(f"{args.ranks} ranks: {run['seconds']:.2f} s, largest process "
          f"{run['largest_mb']:.0f} MB, whole tree {run['tree_mb']:.0f} MB, "
          f"{run['collectives']} collectives matched")
    described = big / "run.json"  # multirank_input.py's: the offsets its run holds
    expected = json.loads(described.read_text()).get("clock_offset_us") \
        if described.is_file() else None
    if expected:
        errors = [abs(run["offsets"][r] - v) for r, v in expected.items()
                  if run["offsets"].get(r) is not None]
        print(f"clock offsets of {len(errors)} ranks against multirank_input.py's "
              f"(source truth + added): largest error {max(errors):,.0f} us, median "
              f"{sorted(errors)[len(errors) // 2]:,.0f} us")
    ok_time = run["seconds"] <= target
    print(f"time: {run['seconds']:.2f} s vs target ({args.ranks}/{cores}) x "
          f"{alone['seconds']:.2f} s x {TARGET_FACTOR} = {target:.2f} s: "
          f"{'met' if ok_time else 'NOT met'}")
    per_rank = (run["tree_mb"] - few["tree_mb"]) / max(1, args.ranks - args.small)
    trace_mb = files[0].stat().st_size / 1e6
    ok_mem = run["tree_mb"] <= MEMORY_LIMIT_MB and per_rank <= GROWTH_FRACTION * trace_mb
    print(f"memory: whole tree {run['tree_mb']:.0f} MB with {args.ranks} ranks (limit "
          f"{MEMORY_LIMIT_MB}), {few['tree_mb']:.0f} MB with {args.small}: "
          f"{per_rank:.2f} MB more per rank (what it keeps of a {trace_mb:.0f} MB trace; "
          f"bound {GROWTH_FRACTION:.0%} of it); largest process {run['largest_mb']:.0f} MB "
          f"vs {few['largest_mb']:.0f} MB: {'met' if ok_mem else 'NOT met'}")
    slope_s = (run["seconds"] - few["seconds"]) / max(1, args.ranks - args.small)
    extra = args.estimate - args.ranks
    print(f"{args.estimate:,} ranks, by the measured slope ({slope_s:.3f} s and "
          f"{per_rank:.2f} MB a rank from {args.small} to {args.ranks} ranks): about "
          f"{run['seconds'] + slope_s * extra:.0f} s and a tree of "
          f"{run['tree_mb'] + per_rank * extra:.0f} MB on these {cores} cores "
          f"(target there: ({args.estimate}/{cores}) x {alone['seconds']:.2f} s x "
          f"{TARGET_FACTOR} = {(args.estimate / cores) * alone['seconds'] * TARGET_FACTOR:.0f} s)")



if __name__ == "__main__":
    main()
