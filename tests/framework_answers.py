"""The frameworks' own answers (``fixtures/megatron/truth``, ``fixtures/deepspeed/truth`` and
their 2-rank traces, recorded from Megatron-Core 0.16.1 and DeepSpeed 0.19.8 running) and
tracecli's plans of the same settings, in one comparable form, for the side-by-side tests.

A Megatron-Core launch or a tracecli bucket: ``(members by name, elements sent with
padding, dtype sent, collective, the parameter whose readiness launched it)``; a DeepSpeed
flush: ``(members by name, communication dtype, ((collective, elements) a call), the
parameter whose entry flushed it)``. The last field is compared where the run says.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tracecli import load_trace
from tracecli.parsers import LoadOptions, load
from tracecli.pipeline import ComputeRequest, CostRequest, plan_trace

FIXTURES = Path(__file__).parent / "fixtures"
MEGATRON = FIXTURES / "megatron"
DEEPSPEED = FIXTURES / "deepspeed"
WIDTH = {"float32": 4, "bfloat16": 2, "float16": 2}
OPS = {"all_reduce": "allreduce", "reduce_scatter": "reduce_scatter",
       "reduce_scatter_tensor": "reduce_scatter"}
OP_LIST = ComputeRequest(backward_ms=100.0)  # an op list or parameter list has no timings


def record(path: Path) -> dict:
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            return json.load(f)
    return json.loads(path.read_text())


def truth_files(folder: Path, schema: str) -> list[Path]:
    return sorted(folder.glob(f"*.{schema}-truth.json*"))


# -- Megatron-Core -----------------------------------------------------------------------------

def megatron_options(s: dict) -> dict:
    return dict(megatron_overlap_grad_reduce=s["overlap_grad_reduce"],
                megatron_bucket_size=s["bucket_size"] or 0,
                megatron_distributed_optimizer=s["use_distributed_optimizer"],
                megatron_grad_reduce_in_fp32=s["grad_reduce_in_fp32"],
                megatron_pad_buckets_for_high_nccl_busbw=s["pad_buckets_for_high_nccl_busbw"],
                megatron_expert_dp=s["expert_dp"])


def megatron_launches(doc: dict, s: dict) -> list[tuple]:
    names = doc["params"]
    out = []
    for x in s["launches"]:
        b = s["buckets"][x["group"]]
        out.append((frozenset(names[i] for i in b["members"]), b["numel"], b["grad_dtype"],
                    OPS[x["collective"]], None if x["after"] is None else names[x["after"]]))
    return out


def megatron_plan(trace, s: dict, compute: ComputeRequest):
    return plan_trace(trace, "megatron", megatron_options(s), compute, CostRequest(gpus=s["dp"]),
                      advise=False).plan


def megatron_buckets(plan, overlap: bool) -> list[tuple]:
    """The plan's buckets in launch order; the launching parameter: the member whose
    gradient is ready last (``None`` without ``overlap_grad_reduce``: finish_grad_sync)."""
    ready = {g.name: g.ready_ms for g in plan.inp.grads}
    out = []
    for b in plan.buckets:
        names = plan.tensor_names(b.index)
        last = max(names, key=lambda n: ready[n]) if overlap else None
        if overlap and sum(ready[n] == ready[last] for n in names) > 1:
            last = "(a tie)"
        out.append((frozenset(names), b.nbytes // WIDTH[b.dtype], b.dtype, b.collective.value, last))
    return out


def megatron_op_list(doc: dict):
    truth = MEGATRON / "truth"
    return load(truth / doc["ops"], LoadOptions(sizes=str(truth / doc["sizes"])))


def megatron_params(doc: dict):
    return load(MEGATRON / "truth" / doc["sizes"])


def megatron_trace(doc: dict):
    return load_trace(MEGATRON / doc["trace"])


# -- DeepSpeed ---------------------------------------------------------------------------------

def deepspeed_options(case: dict) -> dict:
    cfg = case["config"]
    zero = cfg["zero_optimization"]
    precision = ("bf16" if cfg.get("bf16", {}).get("enabled") else
                 "fp16" if cfg.get("fp16", {}).get("enabled") else "auto")
    autocast = cfg.get("torch_autocast", {})
    return dict(deepspeed_stage=zero["stage"],
                deepspeed_reduce_bucket_size=zero.get("reduce_bucket_size", 0),
                deepspeed_overlap_comm=str(zero["overlap_comm"]).lower() if "overlap_comm" in zero else "auto",
                deepspeed_no_reduce_scatter=not zero.get("reduce_scatter", True),
                deepspeed_communication_data_type=cfg.get("communication_data_type", ""),
                deepspeed_precision=precision,
                deepspeed_autocast=autocast.get("dtype", "") if autocast.get("enabled") else "")


def deepspeed_flushes(doc: dict, case: dict) -> list[tuple]:
    """DeepSpeed's flushes that sent something (an empty bucket's flush sends nothing)."""
    n = doc["params"]
    return [(frozenset(n[i] for i in f["members"]), f["comm_dtype"],
             tuple((OPS[x["op"]], x["elements"]) for x in f["sent"]),
             None if f["by"] is None else n[f["by"]]) for f in case["flushes"] if f["members"]]


def deepspeed_plan(trace, case: dict, compute: ComputeRequest):
    return plan_trace(trace, "deepspeed", deepspeed_options(case), compute,
                      CostRequest(gpus=case["world_size"]), advise=False).plan


def deepspeed_buckets(plan, overlap: bool) -> list[tuple]:
    """The plan's buckets as flushes; the flushing parameter: the gradient ready when the
    bucket left (``None``: the end of backward, or every flush without ``overlap_comm``)."""
    ready = {g.name: g.ready_ms for g in plan.inp.grads}
    end = max(ready.values())
    out = []
    for b in plan.buckets:
        width = WIDTH[b.dtype]
        sent = tuple((b.collective.value, p.nbytes // width) for p in b.pieces) or \
            ((b.collective.value, b.nbytes // width),)
        at = [n for n, r in ready.items() if r == b.ready_ms]
        by = None if not overlap or b.ready_ms >= end or len(at) != 1 else at[0]
        out.append((frozenset(plan.tensor_names(b.index)), b.dtype, sent, by))
    return out


def deepspeed_sidecar(doc: dict, case: dict) -> Path:
    return DEEPSPEED / "truth" / doc["sidecars"][case["precision"]]


def deepspeed_op_list(doc: dict, case: dict):
    kind = ("zero3" if case["stage"] == 3 else "zero12") + \
        ("-autocast" if case["precision"].startswith("autocast") else "")
    return load(DEEPSPEED / "truth" / f"{doc['model']}.{kind}.ops.txt",
                LoadOptions(sizes=str(deepspeed_sidecar(doc, case))))


def same_flushes(ours: list[tuple], theirs: list[tuple]) -> bool:
    """Equal flushes; the flushing parameter compared where both name one."""
    return len(ours) == len(theirs) and all(
        a[:3] == b[:3] and (a[3] is None or b[3] is None or a[3] == b[3]) for a, b in zip(ours, theirs))
