"""How many of Megatron-Core's and DeepSpeed's own recorded answers tracecli's plans equal,
per model and per input path (the counts behind issue 29's side-by-side tests). A profiled
model is also planned under every setting recorded of it (Megatron) or every case with its
hooks and precision (DeepSpeed): backward's order is the model's, not the setting's.

    PYTHONPATH=. python benchmarks/frameworks_equal.py

Megatron-Core 0.16.1 (``tests/fixtures/megatron/truth``, ``mc_*``): a setting is equal when
every launch is (members, elements sent with padding, dtype, collective, launch order, and
the parameter whose readiness launched it). DeepSpeed 0.19.8 (``tests/fixtures/deepspeed/
truth``, ``ds_*``): a case is equal when every flush is (members, communication dtype, each
collective sent with its elements, the parameter whose entry flushed it). From a parameter
list alone, readiness is the reverse of the list (what Megatron assumes): Megatron's bucket
layout (members, sizes, dtypes, collectives) is counted, and the launches where the run's
order is that one; DeepSpeed's flushes are counted where its hook order is that one, and
over every case.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from framework_answers import (  # noqa: E402
    DEEPSPEED, MEGATRON, OP_LIST, deepspeed_buckets, deepspeed_flushes, deepspeed_op_list,
    deepspeed_plan, deepspeed_sidecar, megatron_buckets, megatron_launches, megatron_op_list, megatron_params,
    megatron_plan, record, same_flushes, truth_files,
)
from tracecli import load_trace  # noqa: E402
from tracecli.parsers import load  # noqa: E402
from tracecli.pipeline import ComputeRequest  # noqa: E402


def _plain(bucket: tuple) -> tuple:
    """A bucket's layout (members, elements, dtype, collective), sortable."""
    return (tuple(sorted(bucket[0])), *bucket[1:4])


def _megatron(doc: dict, trace, compute) -> tuple[tuple[int, int], tuple[int, int]]:
    """Settings whose launches are all Megatron's, and those whose bucket layout is (the
    same buckets, launched in any order), each of the settings recorded."""
    exact = layout = 0
    for s in doc["settings"]:
        ours = megatron_buckets(megatron_plan(trace, s, compute), s["overlap_grad_reduce"])
        theirs = megatron_launches(doc, s)
        exact += ours == theirs
        layout += sorted(_plain(b) for b in ours) == sorted(_plain(b) for b in theirs)
    return (exact, len(doc["settings"])), (layout, len(doc["settings"]))


def _deepspeed(doc: dict, trace_of, compute, only=lambda case: True) -> tuple[int, int]:
    equal = total = 0
    for case in doc["cases"]:
        if "error" in case or not only(case):
            continue
        plan = deepspeed_plan(trace_of(case), case, compute)
        ours = deepspeed_buckets(plan, case["engine"]["overlap_comm"])
        equal += same_flushes(ours, deepspeed_flushes(doc, case))
        total += 1
    return equal, total


def _hooks(case: dict) -> tuple:
    """What fixes DeepSpeed's hook order and dtypes: ZeRO-3's hooks, and the precision."""
    return case["stage"] == 3, case["precision"]


def _row(what: str, model: str, counts: tuple[int, int]) -> tuple[int, int]:
    print(f"  {what:<34} {model:<18} {counts[0]:>4} of {counts[1]:<4} equal")
    return counts


MODELS: dict[str, dict] = {}


def main() -> int:
    sums: dict[str, list[int]] = {}

    def add(key, counts):
        s = sums.setdefault(key, [0, 0])
        s[0] += counts[0]
        s[1] += counts[1]

    print("Megatron-Core 0.16.1 (settings)")
    for path in truth_files(MEGATRON / "truth", "megatron"):
        doc = record(path)
        add("megatron op list + sidecar",
            _row("op list + sidecar", doc["model"], _megatron(doc, megatron_op_list(doc), OP_LIST)[0]))
        exact, layout = _megatron(doc, megatron_params(doc), OP_LIST)
        add("megatron parameter list: buckets", _row("parameter list: buckets", doc["model"], layout))
        add("megatron parameter list: launches as run", _row("parameter list: launches as run",
                                                             doc["model"], exact))
    for path in truth_files(MEGATRON, "megatron"):
        doc = record(path)
        trace = load_trace(MEGATRON / doc["trace"])
        add("megatron profiler trace", _row("profiler trace (2 gloo ranks)", doc["model"],
                                            _megatron(doc, trace, ComputeRequest())[0]))
        full = record(next((MEGATRON / "truth").glob(f"{doc['model']}.megatron-truth.json*")))
        add("megatron profiler trace, every setting of its model",
            _row("trace, every setting of its model", doc["model"],
                 _megatron(full, trace, ComputeRequest())[0]))
    print("DeepSpeed 0.19.8 (cases: setting x world size 1-8 DeepSpeed ran)")
    MODELS.update({record(p)["model"]: record(p) for p in truth_files(DEEPSPEED / "truth", "deepspeed")})
    for path in truth_files(DEEPSPEED / "truth", "deepspeed"):
        doc = record(path)
        reverse = list(reversed(range(len(doc["params"]))))
        add("deepspeed op list + sidecar", _row("op list + sidecar", doc["model"],
                                                _deepspeed(doc, lambda c: deepspeed_op_list(doc, c), OP_LIST)))
        assumed = (lambda c: c["entered"] == reverse or
                   (c["stage"] == 1 and not c["engine"]["overlap_comm"]))
        add("deepspeed parameter list (assumed order right)",
            _row("parameter list, assumed order right", doc["model"],
                 _deepspeed(doc, lambda c: load(deepspeed_sidecar(doc, c)), OP_LIST, assumed)))
        add("deepspeed parameter list (all)", _row("parameter list, every case", doc["model"],
                                                   _deepspeed(doc, lambda c: load(deepspeed_sidecar(doc, c)), OP_LIST)))
    for path in truth_files(DEEPSPEED, "deepspeed"):
        doc = record(path)
        trace = load_trace(str(path).replace(".deepspeed-truth.json", ".json.gz"))
        add("deepspeed profiler trace", _row("profiler trace (2 gloo ranks)", path.name.split(".")[0],
                                             _deepspeed(doc, lambda c: trace, ComputeRequest())))
        hooks = _hooks(doc["cases"][0])
        add("deepspeed profiler trace, every case of its hooks",
            _row("trace, every case of its hooks", path.name.split(".")[0],
                 _deepspeed(MODELS[doc["model"]], lambda c: trace, ComputeRequest(),
                            lambda c: _hooks(c) == hooks)))
    print("Totals")
    for key, (equal, total) in sums.items():
        print(f"  {key:<50} {equal:>5} of {total:<5} equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
