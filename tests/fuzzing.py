"""Mutated inputs for every format, and a runner that holds tracecli to its contract.

The contract, for any input: exit 0 with valid JSON on stdout, or exit 2 with exactly one
line on stderr naming one of the files; never exit 1 (a bug), never more than 10 s, never
more than 1 GB. ``run_campaign`` checks it on seeded mutants of small real inputs; the CI
test runs a few thousand (``tests/cli/test_fuzz.py``), ``benchmarks/fuzz.py`` a hundred thousand.

Run as a script it is the campaign's worker (a fresh process with an address-space limit,
so its peak memory is its own): ``python tests/fuzzing.py --count N --seed S``; it prints
one JSON summary line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
NCCL = FIXTURES / "nccl"
RUN = FIXTURES / "multirank" / "gloo2_straggler"
ROOT = HERE.parent

HOSTILE_NUMBERS = ["-1", "0", "1e308", "-1e308", "1e-320", "NaN", "-Infinity", "Infinity",
                   "9" * 5000, "1.5", "-0", "4294967296", "18446744073709551617", "65536",
                   "99999999999999999999", "2147483647", "3"]
HOSTILE_JSON = ["null", '"x"', "[]", "{}", "true", "[[1]]", '{"a": 1}', "[-1]", "[1e308]"]


def seeds() -> dict[str, dict[str, bytes]]:
    """Per format: the files of one small, valid input (the first is the trace)."""
    return {
        "chainer": {"trace.txt": (FIXTURES / "mlp_chainer.txt").read_bytes()},
        "tf-schedule": {"trace.txt": (FIXTURES / "small_tf.txt").read_bytes(),
                        "trace.sizes.json": (FIXTURES / "small_tf.sizes.json").read_bytes()},
        "kineto": {"trace.json": (FIXTURES / "kineto_step.json").read_bytes()},
        "kineto-modules": {"trace.json": _one_event_a_line(FIXTURES / "kineto_modules" / "mlp.json.gz")},
        "params": {"params.json": (FIXTURES / "megatron" / "distopt.sizes.json").read_bytes()},
        "plan": {"plan.json": None},  # made from the chainer seed at run time
        "op-times": {"times.json": json.dumps({"op1": 0.5, "/l1": 2.0, "forward_ms": 3}).encode()},
        "nccl-tests": {"perf.txt": (NCCL / "cscs_gh200_2x1_all_reduce_perf.txt").read_bytes()},
        "nccl-tests-json": {"perf.json": _nccl_tests_json()},
        "nccl-log": {"nccl.log": (NCCL / "nccl_tests_350_a100pcie_2x1_graph.log").read_bytes()},
        "run": {f"rank{r}.json": gzip.decompress((RUN / f"rank{r}.json.gz").read_bytes())
                for r in (0, 1)},
        "calibration": {"cal.json": json.dumps({
            "format": "tracecli-calibration", "version": 1, "backend": "gloo", "device": "cpu",
            "gpus": 2, "algorithm": "ring", "alpha_us": 100.0, "bandwidth_gbps": 1.5,
            "fit": {"r2": 0.99, "mape_pct": 3.0},
            "points": [{"bytes": 4096, "median_ms": 0.3, "times_ms": [0.3], "predicted_ms": 0.3},
                       {"bytes": 1048576, "median_ms": 1.2, "times_ms": [1.2], "predicted_ms": 1.2}]
        }).encode()},
    }


def _nccl_tests_json() -> bytes:
    """The all-reduce seed as nccl-tests' -J file (tests/nccl_json_writer.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from nccl_json_writer import as_json
    from tracecli.costs.nccl.nccl_tests import read_nccl_tests

    rows = read_nccl_tests(str(NCCL / "cscs_gh200_2x1_all_reduce_perf.txt")).rows
    return as_json(rows, "all_reduce_perf", processes=2).encode()


def _one_event_a_line(path: Path) -> bytes:
    """A gzipped profiler trace as compact JSON text, one event a line."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc.pop("traceEvents")
    return ('{"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n],\n"
            + json.dumps(doc)[1:] + "\n").encode()


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three random edits of ``data``."""
    for _ in range(rng.randint(1, 3)):
        data = rng.choice(_OPERATORS)(data, rng)
    return data


def _numbers(data: bytes, rng):
    spots = [m.span() for m in re.finditer(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", data)]
    if not spots:
        return data
    a, b = rng.choice(spots)
    return data[:a] + rng.choice(HOSTILE_NUMBERS).encode() + data[b:]


def _json_value(data: bytes, rng):
    spots = [m.span(1) for m in re.finditer(rb":\s*(\"[^\"]*\"|-?\d[\d.eE+-]*|\[[^\[\]]*\]|true|false|null)", data)]
    if not spots:
        return _numbers(data, rng)
    a, b = rng.choice(spots)
    return data[:a] + rng.choice(HOSTILE_JSON + HOSTILE_NUMBERS).encode() + data[b:]


def _duplicate_key(data: bytes, rng):
    spots = [m for m in re.finditer(rb"\"(\w[\w ]*)\"\s*:\s*([^,{}\[\]]+)", data)]
    if not spots:
        return data
    m = rng.choice(spots)
    return data[:m.end()] + b", " + m.group(0) + data[m.end():]


def _lines(data: bytes, rng):
    lines = data.split(b"\n")
    if len(lines) < 2:
        return data
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    op = rng.randrange(4)
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[j])
    elif op == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines[i] = lines[i] * rng.randint(2, 50)
    return b"\n".join(lines)


def _truncate(data: bytes, rng):
    return data[:rng.randrange(len(data) + 1)]


def _bytes(data: bytes, rng):
    i = rng.randrange(len(data) + 1)
    junk = rng.choice([b"\x00", b"\xff\xfe", b"\r", b"\n\n", b"{", b"]", b" ", b"\t", b"\xe2\x82",
                       bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))])
    return data[:i] + junk + data[i:]


def _token(data: bytes, rng):
    tokens = re.findall(rb"[A-Za-z_][\w./:#-]*", data)
    spots = [m.span() for m in re.finditer(rb"[A-Za-z_][\w./:#-]*", data)]
    if not spots:
        return data
    a, b = rng.choice(spots)
    return data[:a] + rng.choice(tokens) + data[b:]


def _index(data: bytes, rng):
    """Huge or odd variable indices in op-list names (cond_N, update_N, _K suffixes)."""
    spots = [m.span(1) for m in re.finditer(rb"_(\d+)", data)]
    if not spots:
        return _numbers(data, rng)
    a, b = rng.choice(spots)
    return data[:a] + rng.choice([b"10000000", b"9" * 30, b"9" * 5000, b"0", b"00"]) + data[b:]


_OPERATORS = [_numbers, _numbers, _json_value, _duplicate_key, _lines, _truncate, _bytes, _token,
              _index]


def _plan_seed(tmp: Path) -> bytes:
    from click.testing import CliRunner

    from tracecli.cli import cli

    out = tmp / "seed-plan.json"
    result = CliRunner().invoke(cli, ["plan-buckets", str(FIXTURES / "mlp_chainer.txt"), "--out",
                                      str(out), "--strategy", "ddp"])
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def commands(kind: str, files: dict[str, Path]) -> list[list[str]]:
    """What to run on a mutant of ``kind``."""
    first = str(next(iter(files.values())))
    chainer = str(FIXTURES / "mlp_chainer.txt")
    if kind in ("chainer", "kineto", "kineto-modules"):
        return [["inspect", first, "--json"], ["plan-buckets", first, "--json", "--strategy", "optimal"]]
    if kind == "params":  # a parameter list, no trace: a model of the step
        return [["inspect", first, "--json"],
                ["plan-buckets", first, "--json", "--strategy", "megatron", "--gpus", "8",
                 "--megatron-distributed-optimizer", "--megatron-overlap-grad-reduce"],
                ["plan-buckets", first, "--json", "--strategy", "deepspeed", "--backward-ms", "10"]]
    if kind == "tf-schedule":
        return [["inspect", first, "--json", "--backward-ms", "10"],
                ["plan-buckets", first, "--json", "--backward-ms", "10", "--strategy", "horovod"]]
    if kind == "plan":
        # everything a replay reads and checks before it starts a rank, without ranks
        return [["replay", "--plan", first, "--gpus", "2", "--network", "10gbe", "--iters", "1",
                 "--dry-run", "--json"]]
    if kind == "op-times":
        return [["plan-buckets", chainer, "--op-times", first, "--json"]]
    if kind == "calibration":
        return [["plan-buckets", chainer, "--calibration", first, "--json"]]
    if kind in ("nccl-tests", "nccl-tests-json"):  # a measured curve, and a cost source
        net = ["--nodes", "2", "--nic-gbps", "200", "--nccl", "2.30.7"]
        return [["collective", "allreduce", "--measured", first, "--json", *net],
                ["plan-buckets", chainer, "--nccl-tests", first, "--json", *net]]
    if kind == "nccl-log":  # NCCL's own graph, from its GRAPH/TUNING log
        return [["collective", "allreduce", "--nccl-log", first, "--nodes", "2",
                 "--gpus-per-node", "1", "--device", "a100", "--nic-gbps", "200",
                 "--intra", "pcie", "--sizes", "1k,1G", "--json"]]
    if kind == "run":  # a run's directory of per-rank traces
        return [["inspect", str(Path(first).parent), "--json"]]
    raise ValueError(kind)


def check(result, files: dict[str, Path], seconds: float) -> str | None:
    """The contract; ``None`` when kept, else what was broken."""
    if seconds > 10:
        return f"took {seconds:.1f} s"
    if result.exit_code == 0:
        try:
            json.loads(result.stdout)
        except ValueError:
            return "exit 0 without valid JSON"
        return None
    if result.exit_code != 2:
        return f"exit {result.exit_code}: {result.stderr.strip()[:300]}"
    lines = result.stderr.strip().splitlines()
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr: {result.stderr[:300]!r}"
    named = [str(p) for p in files.values()] + [str(p.parent) for p in files.values()]
    if not any(lines[0].startswith(n) for n in named) and not lines[0].startswith("tracecli"):
        return f"error names no file: {lines[0][:200]}"
    if "Traceback" in result.stderr:
        return "traceback"
    return None


def run_campaign(count: int, seed: int, kinds: list[str] | None = None) -> dict:
    from click.testing import CliRunner

    from tracecli.cli import cli

    rng = random.Random(seed)
    base = seeds()
    kinds = kinds or list(base)
    failures, ran, slowest = [], 0, 0.0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base["plan"]["plan.json"] = _plan_seed(tmp)
        for n in range(count):
            kind = kinds[n % len(kinds)]
            case = tmp / f"case{n}"
            case.mkdir()
            files = {}
            target = rng.choice(list(base[kind]))
            for name, data in base[kind].items():
                path = case / name
                path.write_bytes(mutate(data, rng) if name == target else data)
                files[name] = path
            for args in commands(kind, files):
                started = time.perf_counter()
                result = CliRunner().invoke(cli, args, catch_exceptions=True)
                seconds = time.perf_counter() - started
                slowest = max(slowest, seconds)
                ran += 1
                problem = check(result, files, seconds)
                if problem and result.exit_code == 1:  # a bug: keep where it happened
                    again = CliRunner().invoke(cli, ["--debug"] + args, catch_exceptions=True)
                    if again.exc_info:
                        problem += " | " + "".join(traceback.format_exception(*again.exc_info))[-1200:]
                if problem:
                    failures.append({"kind": kind, "args": args, "problem": problem,
                                     "input": files[target].read_bytes()[:3000].decode("latin-1")})
            for path in files.values():
                path.unlink()
            case.rmdir()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"mutants": count, "runs": ran, "failures": failures[:20], "failed": len(failures),
            "slowest_s": slowest, "peak_mb": peak}


def mapped_bytes() -> int:
    """This process's address space now (``VmSize``): the limit is ``--memory-gb`` beyond it."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


def main() -> None:
    parser = argparse.ArgumentParser(description="fuzz worker")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", nargs="*")
    parser.add_argument("--memory-gb", type=float, default=3.0)
    args = parser.parse_args()
    try:  # replay's commands import torch: a CUDA build maps gigabytes of libraries, not input's
        import torch  # noqa: F401
    except ImportError:
        pass
    limit = mapped_bytes() + int(args.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.path.insert(0, str(ROOT))
    print(json.dumps(run_campaign(args.count, args.seed, args.kinds)))


if __name__ == "__main__":
    main()
