"""One command for the first GPU: the CUDA replay path checked end to end (issue 28).

    python benchmarks/gpu_check.py [--gpus N] [--timeout 10] [--dry-run]

On a machine with 1, 2, 4 or 8 visible GPUs (more: the largest of those) it runs, on N GPUs:

- ``one rank``: a replay on one GPU through the library (``CudaStep``, events, the spin's
  calibration and rescaling, verification): iteration against the plan, compute and spin
  drift;
- ``pytest nccl``: tests/replay/test_replay.py's NCCL replay test;
- ``calibrate``: ``tracecli calibrate --backend nccl``, and beside it nccl-tests'
  ``all_reduce_perf`` at the same sizes when it is on PATH (or in ``$NCCL_TESTS_DIR``);
- ``replay --baseline``: the VGG-19 sample calibrated in place, with the bare loop;
- ``fault raise`` / ``fault hang``: rank 1 raises / hangs under ``--timeout``: the message
  must name rank 1, and every rank must be gone within the timeout plus the grace;
- ``long step``: a backward three times ``--timeout`` long must not be aborted by NCCL's
  watchdog;
- ``torchrun``: ``torchrun --standalone --nproc-per-node N`` of the replay.

It prints one table (check, pass/FAIL/skip, seconds, figures) and exits 1 if a check failed.
With one GPU only ``one rank`` runs (the others need two). Without a CUDA device (or with
``--dry-run``) it lists what it would run and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple, Optional

ROOT = Path(__file__).resolve().parent.parent
VGG = ROOT / "sample_traces" / "vgg19_chainer.txt"
GRACE_S = 3.0  # replay.processes.GRACE_S
SCRATCH = Path(tempfile.gettempdir()) / f"gpu_check-{os.getpid()}"  # calibrate's profile
CALIBRATE_ITERS = 10
START_S = 60.0  # ranks' start-up on a busy node: torch, CUDA contexts, NCCL communicators


class Outcome(NamedTuple):
    ok: bool
    figures: str


class Check(NamedTuple):
    name: str
    needs: int  # GPUs
    command: Callable[[int, float], list[str]]
    judge: Callable[[subprocess.CompletedProcess, float, int, float], Outcome]
    available: Callable[[], Optional[str]] = lambda: None  # why it cannot run here


def tracecli(*args) -> list[str]:
    return [sys.executable, "-m", "tracecli", *map(str, args)]


def _doc(out) -> dict:
    return json.loads(out.stdout)


def _last(out) -> str:
    lines = out.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def judge_one_rank(out, seconds, n, timeout) -> Outcome:
    if out.returncode:
        return Outcome(False, _last(out))
    d = _doc(out)
    m = d["measured"]
    ok = d["replay"]["verified"] and d["replay"]["backend"] == "nccl"
    return Outcome(ok, f"iteration {m['iteration_ms']:.3f} ms (plan {d['predicted']['iteration_ms']:.3f}); "
                       f"compute {m['compute_drift_pct']:+.2f}%; spin clock "
                       f"{d['replay']['spin_clock_drift_pct']:+.2f}%; verified {d['replay']['verified']}")


def judge_exit0(out, seconds, n, timeout) -> Outcome:
    tail = out.stdout.strip().splitlines()[-1:] or [_last(out)]
    return Outcome(out.returncode == 0, tail[0][:100])


def judge_calibrate(out, seconds, n, timeout) -> Outcome:
    if out.returncode:
        return Outcome(False, _last(out))
    d = _doc(out)
    SCRATCH.mkdir(exist_ok=True)
    (SCRATCH / "calibration.json").write_text(out.stdout)
    alone = sum(len(p["times_ms"]) for p in d["points"])
    queued = sum(len(p["queued_times_ms"]) for p in d["points"])
    wanted = CALIBRATE_ITERS * len(d["points"])  # fewer: runs the host could not keep ahead of
    return Outcome(True, f"alpha {d['alpha_us']:.2f} us, bus {d['bandwidth_gbps']:.1f} GB/s, "
                         f"R² {d['fit']['r2']:.4f}, MAPE {d['fit']['mape_pct']:.1f}%; samples "
                         f"kept {alone}/{wanted} alone, {queued}/{wanted} queued")


def judge_nccl_tests(out, seconds, n, timeout) -> Outcome:
    from tracecli.costs.nccl.nccl_tests import parse_nccl_tests

    if out.returncode:
        return Outcome(False, _last(out) or out.stdout.strip()[-100:])
    ours_path = SCRATCH / "calibration.json"
    if not ours_path.exists():
        return Outcome(False, "calibrate did not run")
    theirs = parse_nccl_tests(out.stdout, "all_reduce_perf")
    ours = {p["bytes"]: p["mean_ms"] for p in json.loads(ours_path.read_text())["points"]}
    ratios = [ours[r.bytes] * 1000.0 / r.time_us for r in theirs.rows if r.bytes in ours]
    if not ratios:
        return Outcome(False, "no size in common with calibrate")
    return Outcome(True, f"tracecli / nccl-tests time: median {statistics.median(ratios):.2f}, "
                         f"{min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} sizes")


def judge_baseline(out, seconds, n, timeout) -> Outcome:
    if out.returncode:
        return Outcome(False, _last(out))
    d = _doc(out)
    m = d["measured"]
    over = [b["overhead_pct"] for b in m["buckets"] if b.get("overhead_pct") is not None]
    return Outcome(d["replay"]["verified"],
                   f"error {d['error_pct']:+.1f}%, compute {m['compute_drift_pct']:+.2f}%, spin "
                   f"{d['replay']['spin_clock_drift_pct']:+.2f}%, overhead median "
                   f"{statistics.median(over):+.1f}% of {len(over)} buckets")


def judge_fault(words: tuple[str, ...], banned: tuple[str, ...] = ()):
    def judge(out, seconds, n, timeout) -> Outcome:
        line = _last(out)
        ok = (out.returncode == 2 and all(w in line for w in words)
              and not any(b in line for b in banned) and seconds < timeout + GRACE_S + START_S)
        return Outcome(ok, f"{seconds:.1f} s: {line[:90]}")
    return judge


def judge_torchrun(out, seconds, n, timeout) -> Outcome:
    if out.returncode:
        return Outcome(False, _last(out))
    d = _doc(out)
    ok = d["replay"]["backend"] == "nccl" and d["replay"]["ranks"] == n and d["replay"]["verified"]
    return Outcome(ok, f"{d['replay']['ranks']} ranks, iteration {d['measured']['iteration_ms']:.3f} ms")


def _nccl_tests() -> Optional[str]:
    found = shutil.which("all_reduce_perf") or shutil.which(
        "all_reduce_perf", path=os.environ.get("NCCL_TESTS_DIR", ""))
    return found


def _torchrun() -> Optional[str]:
    return shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")


FAST = ("--network", "10gbe")  # a given cost model: no calibration before the fault
CHECKS = [
    Check("one rank", 1, lambda n, t: [sys.executable, __file__, "--one-rank"], judge_one_rank),
    Check("pytest nccl", 2, lambda n, t: [sys.executable, "-m", "pytest", "-q", "-p",
                                          "no:cacheprovider", "tests/replay/test_replay.py", "-k",
                                          "nccl_replay_on_gpu"], judge_exit0),
    Check("calibrate", 2, lambda n, t: tracecli("calibrate", "--backend", "nccl", "--gpus", n,
                                                "--min-size", "4KiB", "--max-size", "256MiB",
                                                "--points", "9", "--iters", CALIBRATE_ITERS,
                                                "--json"), judge_calibrate),
    Check("nccl-tests", 2, lambda n, t: [_nccl_tests() or "all_reduce_perf", "-b", "4K", "-e",
                                         "256M", "-f", "4", "-g", str(n), "-w", "5", "-n", "20"],
          judge_nccl_tests, lambda: None if _nccl_tests() else "all_reduce_perf not found"),
    Check("replay --baseline", 2, lambda n, t: tracecli("replay", VGG, "--backend", "nccl",
                                                        "--gpus", n, "--baseline", "--json"),
          judge_baseline),
    Check("fault raise", 2, lambda n, t: tracecli("replay", VGG, *FAST, "--backend", "nccl",
                                                  "--gpus", n, "--timeout", t, "--iters", "3",
                                                  "--inject-fault", "1:raise"),
          judge_fault(("rank 1 failed", "planted failure"))),
    Check("fault hang", 2, lambda n, t: tracecli("replay", VGG, *FAST, "--backend", "nccl",
                                                 "--gpus", n, "--timeout", t, "--iters", "3",
                                                 "--inject-fault", "1:hang"),
          judge_fault(("rank 1 did not respond",), ("SIGABRT",))),
    Check("long step", 2, lambda n, t: tracecli("replay", VGG, *FAST, "--backend", "nccl",
                                                "--gpus", n, "--timeout", t, "--backward-ms",
                                                3000 * t, "--iters", "1", "--warmup", "0"),
          judge_exit0),
    Check("torchrun", 2, lambda n, t: [_torchrun() or "torchrun", "--standalone",
                                       "--nproc-per-node", str(n), "-m", "tracecli", "replay",
                                       str(VGG), *FAST, "--backend", "nccl", "--iters", "3",
                                       "--json"],
          judge_torchrun, lambda: None if _torchrun() else "torchrun not found"),
]


def one_rank() -> None:
    """``--one-rank``: a replay on one GPU through the library; its report as JSON."""
    from tracecli import load_trace
    from tracecli.costs import resolve_cost_model
    from tracecli.pipeline import ComputeRequest, inputs
    from tracecli.planning import options_of
    from tracecli.replay import Ranks, ReplayJob, run_replay

    _, _, inp = inputs(load_trace(VGG), ComputeRequest(device="h100"))
    job = ReplayJob(inp, "ddp", options_of("ddp"), resolve_cost_model(1, "nvlink-h100"), "nvlink-h100",
                    iters=10, warmup=2)
    report = run_replay(job, Ranks(1, "nccl", 30.0))
    print(json.dumps(report.to_json()))


def visible_gpus() -> tuple[int, str]:
    try:
        import torch
    except ImportError:
        return 0, "torch is not installed"
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return count, f"torch {torch.__version__}, {count} CUDA devices visible"


def plan(n: int) -> list[tuple[Check, Optional[str]]]:
    """Each check with why it is skipped on ``n`` GPUs (``None``: it runs)."""
    return [(c, f"needs {c.needs} GPUs" if n < c.needs else c.available()) for c in CHECKS]


def table(rows: list[tuple[str, str, str, str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}"
                     for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, help="GPUs to use (default: 8, 4, 2 or 1, the most "
                        "of those visible)")
    parser.add_argument("--timeout", type=float, default=10.0, help="--timeout of the fault "
                        "checks, s")
    parser.add_argument("--dry-run", action="store_true", help="list the checks, run nothing")
    parser.add_argument("--one-rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_rank:
        one_rank()
        return 0
    visible, what = visible_gpus()
    n = args.gpus or next((k for k in (8, 4, 2, 1) if k <= visible), 0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                       os.environ.get("PYTHONPATH")]))}
    if args.dry_run or visible == 0:
        shown = n or 2
        print(f"gpu_check: {what}: dry run, nothing started; on {shown} GPUs it would run:")
        rows = [("check", "would", "", "command")]
        for check, skip in plan(shown):
            rows.append((check.name, f"skip: {skip}" if skip else "run", "",
                         " ".join(map(str, check.command(shown, args.timeout)))))
        print(table(rows))
        return 0
    rows = [("check", "result", "seconds", "figures")]
    failed = False
    for check, skip in plan(n):
        if skip:
            rows.append((check.name, "skip", "", skip))
            continue
        started = time.monotonic()
        try:
            out = subprocess.run(list(map(str, check.command(n, args.timeout))), cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=1800)
            seconds = time.monotonic() - started
            outcome = check.judge(out, seconds, n, args.timeout)
        except (subprocess.TimeoutExpired, ValueError, KeyError, OSError) as exc:
            seconds, outcome = time.monotonic() - started, Outcome(False, f"{type(exc).__name__}: {exc}"[:100])
        failed = failed or not outcome.ok
        rows.append((check.name, "pass" if outcome.ok else "FAIL", f"{seconds:.1f}", outcome.figures))
    shutil.rmtree(SCRATCH, ignore_errors=True)
    print(f"gpu_check on {n} of {visible} GPUs ({what})")
    print(table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
