"""Issue 24's checks on every real trace here, with the figures: ``plan-buckets --compare
--json`` under each trace's default model (a profiler trace's own times, fitted; a preset
elsewhere) and under NCCL's model of two DGX H100 nodes.

Per trace and model it prints the optimal plan's predicted iteration, the fastest other row
(and ``ddp tuned``), and each advice record (framework, verdict, gain against the model's
error); it checks that no predicted row beats ``optimal``, that ``advice`` is there, that no
``set`` verdict has a gain inside its error (or an unknown error), and that a
``keep-defaults`` verdict pastes the defaults or nothing. On the DDP-mode fixtures it checks
that ``--strategy ddp`` gives the buckets torch reported in the same run
(``NAME.torch.json``). Exit status 1 on any failed check.

    PYTHONPATH=$PWD python benchmarks/advice_check.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracecli.cli import cli  # noqa: E402

SAMPLES = ROOT / "sample_traces"
KINETO = ROOT / "tests" / "fixtures" / "kineto"
TRACES = [(SAMPLES / "vgg19_chainer.txt", ()),
          (SAMPLES / "resnet50_horovod_tf.txt", ("--backward-ms", "120")),
          *((p, ()) for p in sorted(KINETO.glob("*.json.gz")) if p.name != "mlp_noshapes.json.gz")]
MODELS = {"default": (), "nccl dgx-h100 x2": ("--platform", "dgx-h100", "--nodes", "2")}
MODES = ("unused_some", "unused_allused", "static_graph")


def tracecli(*args: str) -> dict:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if result.exit_code != 0:
        raise SystemExit(f"tracecli {' '.join(map(str, args))}: exit {result.exit_code}\n{result.output}")
    return json.loads(result.stdout)


def check_compare(name: str, model: str, doc: dict) -> list[str]:
    """The figures of one --compare --json, and what fails issue 24's checks."""
    failed = []
    rows = [r for r in doc["compare"] if not r.get("measured")]
    optimal = next(r for r in rows if r["strategy"] == "optimal")
    others = [r for r in rows if r is not optimal]
    fastest = min(others, key=lambda r: r["iteration_ms"])
    tuned = next((r for r in rows if r["label"] == "ddp tuned"), None)
    print(f"{name:28} {model:18} optimal {optimal['iteration_ms']:11.3f}  "
          f"fastest other {fastest['label']:>18} {fastest['iteration_ms']:11.3f}"
          + (f"  ddp tuned {tuned['iteration_ms']:11.3f}" if tuned else ""))
    if fastest["iteration_ms"] < optimal["iteration_ms"] * (1 - 1e-9):
        failed.append(f"{name} {model}: {fastest['label']} beats optimal")
    if "advice" not in doc or not doc["advice"]:
        failed.append(f"{name} {model}: no advice")
    for a in doc.get("advice", []):
        err = "unknown" if a["error_ms"] is None else f"±{a['error_ms']:.3f}"
        print(f"{'':48}{a['framework']:>18} {a['verdict']:13} gain {a['gain_ms']:+9.3f} ms, "
              f"error {err} ms, vs {a['reference']}")
        if a["verdict"] == "set" and (a["error_ms"] is None or a["gain_ms"] <= a["error_ms"]):
            failed.append(f"{name} {model}: {a['framework']} set with a gain inside its error")
        if a["verdict"] == "keep-defaults" and a["paste"] and a["reference"] == "run":
            failed.append(f"{name} {model}: {a['framework']} keeps the run but pastes a setting")
        if a["verdict"] == "keep-defaults" and a["candidate"] and a["paste"] == a["candidate"]:
            failed.append(f"{name} {model}: {a['framework']} keeps the defaults but pastes another setting")
    return failed


def ddp_buckets(name: str) -> list[str]:
    """--strategy ddp on a DDP-mode fixture against torch's own buckets of the same run."""
    trace = KINETO / f"{name}.json.gz"
    truth = json.loads((KINETO / f"{name}.torch.json").read_text())
    want = [b["bytes"] for b in truth["buckets"]["profiled"]]
    plan = tracecli("plan-buckets", trace, "--strategy", "ddp", "--json")
    got = [b["bytes"] for b in plan["buckets"]]
    observed = [b["bytes"] for b in tracecli("plan-buckets", trace, "--strategy", "observed",
                                             "--json")["buckets"]]
    print(f"{name:28} torch {want}  ddp {got}  observed {observed}  "
          f"options {dict((k, v) for k, v in plan['options'].items() if k in ('find_unused_parameters', 'static_graph'))}")
    return [] if got == want == observed else [f"{name}: ddp {got} / observed {observed} != torch {want}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the default models only")
    args = parser.parse_args()
    failed: list[str] = []
    print("DDP's modes: --strategy ddp and observed against torch's buckets (bytes, launch order)")
    for name in MODES:
        failed += ddp_buckets(name)
    print("\n--compare --json: optimal against every other row; the advice records")
    for trace, extra in TRACES:
        for model, cost in MODELS.items():
            if args.quick and cost:
                continue
            doc = tracecli("plan-buckets", trace, "--compare", "--json", *extra, *cost)
            failed += check_compare(trace.name.split(".")[0], model, doc)
    print()
    for line in failed:
        print("FAILED:", line)
    print(f"{len(failed)} failed checks")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
