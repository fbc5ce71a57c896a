"""The fixtures of DDP's modes (issue 24) checked against themselves, standard library only.

``tests/fixtures/kineto/generate.py`` made each case from one torch 2.13 run (2 gloo ranks,
CPU; the ``_cuda`` cases one torch 2.11 NCCL rank on an H100): rank 0's profiler trace, and in ``NAME.torch.json`` what torch itself said in that run
(the reducer's buckets, its caps, the ready order seen by post-accumulate-grad hooks, the
flight recorder's list of collectives). These tests check that the two agree with each other
and with DDP's bucketing rules as ``tests/fixtures/kineto/README.md`` states them from
torch's source, so a test built on a fixture can trust it. They never run tracecli.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

KINETO = Path(__file__).resolve().parents[1] / "fixtures" / "kineto"
FIND_UNUSED = ["unused_some", "unused_allused"]
CUDA = ["resnet18_default_cuda", "resnet18_cap25_cuda", "transformer_default_cuda"]  # H100, NCCL
REBUILT = ["mlp_gradview", "mlp_caplist", "resnet18_default", "resnet18_cap25", "transformer_default", *CUDA]
CASES = FIND_UNUSED + ["static_graph"] + REBUILT
MiB = 1024 * 1024
DTYPES = {"Float": "float", "Int": "int", "Long": "long int"}  # flight recorder -> profiler names


def answers(case: str) -> dict:
    return json.loads((KINETO / f"{case}.torch.json").read_text())


def events(case: str) -> list[dict]:
    with gzip.open(KINETO / f"{case}.json.gz", "rt") as f:
        doc = json.load(f)
    return sorted((e for e in doc["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])


def step(evs: list[dict], k: int) -> list[dict]:
    """The host-thread events inside ProfilerStep#k."""
    span = next(e for e in evs if e["name"] == f"ProfilerStep#{k}")
    return [e for e in evs if e["tid"] == span["tid"] and span["ts"] <= e["ts"] <= span["ts"] + span["dur"]]


def window(evs: list[dict], k: int) -> list[dict]:
    """Every thread's events inside ProfilerStep#k: on a GPU, autograd runs the backward, and
    DDP's hooks that launch the buckets, on its own device thread."""
    span = next(e for e in evs if e["name"] == f"ProfilerStep#{k}")
    return [e for e in evs if span["ts"] <= e["ts"] <= span["ts"] + span["dur"]]


def launches(evs: list[dict]) -> list[tuple[str, list]]:
    """The c10d collectives among ``evs`` (a step's host thread, or every thread of it on a
    GPU), in order: (op, each tensor's shape)."""
    return [(e["name"].removeprefix("c10d::").removesuffix("_"), e["args"]["Input Dims"][0])
            for e in evs if e["name"].startswith("c10d::")]


def issued(a: dict, iteration: int) -> list[dict]:
    return [c for c in a["collectives"] if c["iteration"] == iteration]


def backend(a: dict) -> str:
    return "nccl" if "nccl" in a else "gloo"  # the GPU runs record NCCL's version


def op(c: dict) -> str:
    """A flight-recorder entry's collective without its backend: ``allreduce``, ``broadcast``."""
    return c["op"].split(":", 1)[1].replace("_", "")


def nbytes(p: dict) -> int:
    width = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8}[p["dtype"]]
    n = 1
    for d in p["shape"]:
        n *= d
    return n * width


def assign(order: list[int], params: list[dict], limits: list[int]) -> list[list[int]]:
    """DDP's size rule (``compute_bucket_assignment_by_size``): walk the parameters in the
    given order, add each to its dtype's open bucket, close the bucket once its bytes reach
    the current limit, then move to the next limit (the last one repeats)."""
    closed, open_, used = [], {}, {}
    for i in order:
        dtype = params[i]["dtype"]
        bucket = open_.setdefault(dtype, [[], 0])
        bucket[0].append(i)
        bucket[1] += nbytes(params[i])
        if bucket[1] >= limits[min(used.get(dtype, 0), len(limits) - 1)]:
            closed.append(open_.pop(dtype)[0])
            used[dtype] = used.get(dtype, 0) + 1
    return closed + [b[0] for b in open_.values()]


def construction_rule(a: dict) -> list[list[int]]:
    """Construction-time buckets: parameter order, sorted by their first index, reversed."""
    params = a["named_parameters"]
    caps = a["bucket_config"]
    if caps["per_bucket_bytes_caps"]:
        limits = caps["per_bucket_bytes_caps"]
    elif a["ddp_kwargs"].get("static_graph") or not a["ddp_kwargs"].get("find_unused_parameters"):
        limits = [2 ** 63 - 1]  # sys.maxsize: one bucket per dtype
    elif caps["first_bucket_bytes_cap"] < caps["bucket_bytes_cap"]:
        limits = [caps["first_bucket_bytes_cap"], caps["bucket_bytes_cap"]]
    else:
        limits = [caps["bucket_bytes_cap"]]
    return list(reversed(sorted(assign(list(range(len(params))), params, limits), key=min)))


def rebuild_rule(a: dict, order: list[str]) -> list[list[int]]:
    caps = a["bucket_config"]
    limits = caps["per_bucket_bytes_caps"] or [caps["first_bucket_bytes_cap"], caps["bucket_bytes_cap"]]
    index = {p["name"]: i for i, p in enumerate(a["named_parameters"])}
    return assign([index[n] for n in order], a["named_parameters"], limits)


def torch_buckets(a: dict, when: str) -> list[list[int]]:
    index = {p["name"]: i for i, p in enumerate(a["named_parameters"])}
    return [[index[n] for n in b["params"]] for b in a["buckets"][when]]


# every case -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_files_are_small_and_deterministically_gzipped(case):
    for suffix in (".json.gz", ".sizes.json", ".torch.json"):
        assert (KINETO / f"{case}{suffix}").stat().st_size < 400_000
    head = (KINETO / f"{case}.json.gz").read_bytes()[:10]
    assert head[:2] == b"\x1f\x8b" and head[4:8] == b"\0\0\0\0"  # mtime=0


@pytest.mark.parametrize("case", CASES)
def test_sidecar_is_the_runs_parameters(case):
    a = answers(case)
    assert json.loads((KINETO / f"{case}.sizes.json").read_text()) == a["named_parameters"]
    assert a["torch"].startswith("2.11" if case in CUDA else "2.13") and a["profiled_iterations"] == [3, 4]


@pytest.mark.parametrize("case", CASES)
def test_trace_launches_exactly_what_the_flight_recorder_saw(case):
    a, evs = answers(case), events(case)
    for k in a["profiled_iterations"]:
        fr = [(op(c), c["sizes"]) for c in issued(a, k)]
        host = window(evs, k) if backend(a) == "nccl" else step(evs, k)  # gloo: the host thread
        assert launches(host) == fr and fr
    # the backend's own events (gloo's worker threads, NCCL's host thread) carry the dtypes the
    # flight recorder has
    traced = sorted((e["name"], e["args"]["Input Dims"][0], e["args"]["Input type"][0])
                    for e in evs if e["name"].startswith(backend(a) + ":"))
    recorded = sorted((c["op"], c["sizes"][0], DTYPES[c["dtypes"][0]])
                      for k in a["profiled_iterations"] for c in issued(a, k))
    assert traced == recorded


@pytest.mark.parametrize("case", CASES)
def test_each_profiled_bucket_is_one_all_reduce_of_its_elements(case):
    a = answers(case)
    buckets = a["buckets"]["profiled"]
    for k in a["profiled_iterations"]:
        floats = [c["sizes"][0][0] for c in issued(a, k) if op(c) == "allreduce" and c["dtypes"] == ["Float"]]
        assert floats == [b["numel"] for b in buckets]
        assert a["ready_orders"][str(k)] == a["ready_order"]  # both profiled steps ran alike
    assert sorted(n for b in buckets for n in b["params"]) == sorted(p["name"] for p in a["named_parameters"])
    assert [b["bytes"] for b in buckets] == [sum(nbytes(p) for p in a["named_parameters"] if p["name"] in b["params"])
                                             for b in buckets]


@pytest.mark.parametrize("case", CASES)
def test_construction_buckets_follow_ddps_rule(case):
    a = answers(case)
    assert torch_buckets(a, "construction") == construction_rule(a)
    assert a["ddp"]["bucket_sizes"] == ", ".join(str(b["bytes"]) for b in a["buckets"]["construction"])


# find_unused_parameters=True ----------------------------------------------------------------

@pytest.mark.parametrize("case", FIND_UNUSED)
def test_find_unused_keeps_construction_buckets_and_all_reduces_the_used_map(case):
    a, evs = answers(case), events(case)
    assert a["rebuilt_at_iteration"] is None and a["ddp"]["has_rebuilt_buckets"] == 0
    assert a["buckets"]["profiled"] == a["buckets"]["construction"]
    assert torch_buckets(a, "profiled") != rebuild_rule(a, a["ready_order"])  # what a rebuild would give
    n = len(a["named_parameters"])
    for k in range(5):  # every iteration: the buckets, then one int32 all-reduce of one flag a parameter
        last = issued(a, k)[-1]
        assert (last["op"], last["sizes"], last["dtypes"]) == ("gloo:all_reduce", [[n]], ["Int"])
    for k in a["profiled_iterations"]:
        names = [e["name"] for e in step(evs, k)]
        assert names.count("torch.distributed.ddp.reducer::search_unused_parameters") == 1
        assert names.count("_DDPSink") == 1 and names.count("_DDPSinkBackward") == 1
        assert launches(step(evs, k))[-1] == ("allreduce", [[n]])


def test_unused_parameters_are_zeroed_into_their_bucket_at_the_first_hook():
    a, evs = answers("unused_some"), events("unused_some")
    assert a["unused_in_profiled"] == ["branch.weight", "branch.bias"]
    assert a["ddp"]["unused_parameter_size"] == sum(nbytes(p) for p in a["named_parameters"]
                                                    if p["name"] in a["unused_in_profiled"])
    shapes = {tuple(p["shape"]) for p in a["named_parameters"] if p["name"] in a["unused_in_profiled"]}
    for k in a["profiled_iterations"]:
        evk = step(evs, k)
        first = next(i for i, e in enumerate(evk) if e["name"] == "torch::autograd::AccumulateGrad")
        mul = next(i for i, e in enumerate(evk) if e["name"] == "torch::distributed::reducer::mul_out")
        zeroed = {tuple(e["args"]["Input Dims"][0]) for e in evk[first:mul] if e["name"] == "aten::zero_"}
        assert zeroed == shapes
    assert answers("unused_allused")["unused_in_profiled"] == []


# static_graph=True --------------------------------------------------------------------------

def test_static_graph_rebuilds_after_its_second_iteration_with_unused_parameters_last():
    a, evs = answers("static_graph"), events("static_graph")
    n = len(a["named_parameters"])
    assert a["rebuilt_at_iteration"] == 2 and a["ddp"]["static_graph"] == 1
    # iteration 0: delay_all_reduce sends the used map first, then the one construction bucket
    assert [(c["op"], c["dtypes"]) for c in issued(a, 0)] == [("gloo:all_reduce", ["Int"]), ("gloo:all_reduce", ["Float"])]
    assert issued(a, 0)[0]["sizes"] == [[n]]
    assert [c["sizes"] for c in issued(a, 1)] == [[[sum(b["numel"] for b in a["buckets"]["construction"])]]]
    nbuckets = len(a["buckets"]["profiled"])
    assert [(c["op"], c["sizes"]) for c in issued(a, 2)[:2]] == [("gloo:broadcast", [[n + 1]]), ("gloo:broadcast", [[nbuckets]])]
    assert not [c for c in a["collectives"] if c["iteration"] >= 1 and c["dtypes"] == ["Int"] and c["op"] == "gloo:all_reduce"]
    unused = [p["name"] for p in a["named_parameters"] if p["name"] in a["unused_in_profiled"]]
    assert unused == ["branch.weight", "branch.bias"]
    assert torch_buckets(a, "profiled") == rebuild_rule(a, a["ready_order"] + unused)
    for k in a["profiled_iterations"]:
        names = {e["name"] for e in step(evs, k)}
        assert not names & {"torch.distributed.ddp.reducer::search_unused_parameters", "_DDPSink"}


# default rebuild, bucket_cap_mb, bucket_cap_mb_list, gradient_as_bucket_view -------------

@pytest.mark.parametrize("case", REBUILT)
def test_rebuild_after_the_first_iteration_in_ready_order(case):
    a = answers(case)
    assert a["rebuilt_at_iteration"] == 1 and a["ddp"]["has_rebuilt_buckets"] == 1
    nbuckets, n = len(a["buckets"]["profiled"]), len(a["named_parameters"])
    assert [(op(c), c["sizes"], c["dtypes"]) for c in issued(a, 1)[:2]] == [
        ("broadcast", [[n + 1]], ["Int"]), ("broadcast", [[nbuckets]], ["Int"])]
    assert torch_buckets(a, "profiled") == rebuild_rule(a, a["ready_order"])
    assert a["ddp"]["rebuilt_bucket_sizes"] == ", ".join(str(b["bytes"]) for b in a["buckets"]["profiled"])


@pytest.mark.parametrize("suffix", ["", "_cuda"])
def test_first_bucket_is_1_mib_only_while_bucket_cap_mb_is_left_at_its_default(suffix):
    default, cap25 = answers(f"resnet18_default{suffix}"), answers(f"resnet18_cap25{suffix}")
    assert default["bucket_config"]["first_bucket_bytes_cap"] == MiB
    assert cap25["bucket_config"]["first_bucket_bytes_cap"] == 25 * MiB
    assert default["bucket_config"]["bucket_bytes_cap"] == cap25["bucket_config"]["bucket_bytes_cap"] == 25 * MiB
    assert default["ready_order"] == cap25["ready_order"]
    assert [b["bytes"] for b in default["buckets"]["profiled"]] != [b["bytes"] for b in cap25["buckets"]["profiled"]]


@pytest.mark.parametrize("case", ["resnet18_default", "transformer_default", "resnet18_default_cuda",
                                  "transformer_default_cuda"])
def test_both_default_limits_shape_the_big_models(case):
    buckets = answers(case)["buckets"]["profiled"]
    assert len(buckets) >= 3
    assert buckets[0]["bytes"] >= MiB and len(buckets[0]["params"]) <= 2  # closed at its first big gradient
    assert buckets[1]["bytes"] >= 25 * MiB  # closed by the 25 MiB cap


def test_bucket_cap_mb_list_caps_each_bucket_in_turn():
    a = answers("mlp_caplist")
    assert a["bucket_config"]["per_bucket_bytes_caps"] == [int(0.01 * MiB), 8 * MiB]
    assert [len(b["params"]) for b in a["buckets"]["construction"]] == [7, 1]  # even without find_unused
    assert [b["params"] for b in a["buckets"]["profiled"]][0] == a["ready_order"][:2]


def test_gradient_as_bucket_view_drops_the_copy_back_to_grad():
    view, copy = events("mlp_gradview"), events("mlp_caplist")
    for k in (3, 4):
        assert not [e for e in step(view, k) if e["name"] == "torch.distributed.ddp.reducer::copy_bucket_to_grad"]
        copied = [e for e in step(copy, k) if e["name"] == "torch.distributed.ddp.reducer::copy_bucket_to_grad"]
        assert len(copied) == len(answers("mlp_caplist")["named_parameters"])
    assert answers("mlp_gradview")["ddp"]["gradient_as_bucket_view"] == 1
