"""``--strategy deepspeed`` against DeepSpeed 0.19.8's own flushes
(``fixtures/deepspeed/truth``: ``deepspeed.initialize`` on 1, 2, 3, 4 and 8 real gloo ranks, 32
cases a world size; ``ds_*``: 2-rank runs with their profiler traces), on each input a user
has:

- the op list + sidecar path (``truth/MODEL.KIND.ops.txt``: the recorded hook order in
  Horovod's form, ``truth/MODEL.PRECISION.sizes.json``: the sidecar DeepSpeed's one-liner
  writes after ``deepspeed.initialize``, with its ``comm_dtype`` marks);
- the profiler-trace path (``ds_*.json.gz`` and its sidecar);
- the parameter list alone (the sidecar as the trace).

Compared per flush: members, communication dtype, each collective sent (kind, elements:
a split flush's pieces one by one, ZeRO-3's padding) and the parameter whose entry
flushed it; flushes of an empty bucket send nothing and are no bucket.
"""

from __future__ import annotations

import json

import pytest

from framework_answers import (
    DEEPSPEED, OP_LIST, deepspeed_buckets, deepspeed_flushes, deepspeed_op_list, deepspeed_plan,
    deepspeed_sidecar, record, same_flushes, truth_files,
)
from tracecli import load_trace
from tracecli.errors import PlanError
from tracecli.parsers import load
from tracecli.pipeline import ComputeRequest

TRUTH = truth_files(DEEPSPEED / "truth", "deepspeed")
TRACES = truth_files(DEEPSPEED, "deepspeed")
MODELS = {record(p)["model"]: record(p) for p in TRUTH}


def _id(path):
    return path.name.split(".")[0]


def _pairs(doc, trace_of, compute):
    """(case, ours, theirs) of every case DeepSpeed ran."""
    for case in doc["cases"]:
        if "error" not in case:
            plan = deepspeed_plan(trace_of(case), case, compute)
            yield case, deepspeed_buckets(plan, case["engine"]["overlap_comm"]), \
                deepspeed_flushes(doc, case)


@pytest.mark.parametrize("path", TRUTH, ids=_id)
def test_the_op_list_path_is_deepspeed(path):
    doc = record(path)
    for case, ours, theirs in _pairs(doc, lambda c: deepspeed_op_list(doc, c), OP_LIST):
        assert same_flushes(ours, theirs), (case["id"], case["world_size"], ours, theirs)


@pytest.mark.parametrize("path", TRACES, ids=_id)
def test_the_profiler_trace_path_is_deepspeed(path):
    doc = record(path)
    trace = load_trace(str(path).replace(".deepspeed-truth.json", ".json.gz"))
    for case, ours, theirs in _pairs(doc, lambda c: trace, ComputeRequest()):
        assert same_flushes(ours, theirs), (case["id"], ours, theirs)


def _hooks(case: dict) -> tuple:
    """What fixes DeepSpeed's hook order and the gradients' dtypes: the stage's hooks
    (ZeRO-3's own Linear) and the precision (autocast reorders; configs recast)."""
    return case["stage"] == 3, case["precision"]


@pytest.mark.parametrize("path", TRACES, ids=_id)
def test_the_profiled_step_gives_deepspeeds_flushes_at_every_world_size_and_bucket(path):
    """The trace of one 2-rank run planned as every case DeepSpeed ran with the same hooks
    and precision (world sizes 1-8, bucket sizes, stages 1-2 or 3, overlap_comm,
    reduce_scatter): every flush is DeepSpeed's."""
    doc = record(path)
    full = MODELS[doc["model"]]
    assert full["params"] == doc["params"]
    trace = load_trace(str(path).replace(".deepspeed-truth.json", ".json.gz"))
    alike = {**full, "cases": [c for c in full["cases"] if _hooks(c) == _hooks(doc["cases"][0])]}
    pairs = list(_pairs(alike, lambda c: trace, ComputeRequest()))
    for case, ours, theirs in pairs:
        assert same_flushes(ours, theirs), (case["id"], case["world_size"], ours, theirs)
    assert len(pairs) >= 10


@pytest.mark.parametrize("path", TRUTH, ids=_id)
def test_the_parameter_list_alone_is_deepspeed_where_the_hook_order_is_assumed_right(path):
    """No trace: gradients enter in the reverse of the list's order. DeepSpeed's real hook
    order is autograd's (a LayerNorm's weight before its bias; under ZeRO-3 and autocast a
    Linear's weight before its bias), so the flushes are DeepSpeed's wherever that order is
    the one assumed (stage 1 without overlap_comm walks the parameter order itself)."""
    doc = record(path)
    reverse = list(reversed(range(len(doc["params"]))))
    checked = 0
    for case, ours, theirs in _pairs(doc, lambda c: load(deepspeed_sidecar(doc, c)), OP_LIST):
        if case["entered"] == reverse or (case["stage"] == 1 and not case["engine"]["overlap_comm"]):
            assert same_flushes(ours, theirs), (case["id"], case["world_size"])
            checked += 1
    assert checked >= 5


# -- the cases one by one ----------------------------------------------------------------------

def _case(model: str, cid: str, world: int) -> dict:
    return next(c for c in MODELS[model]["cases"] if c["id"] == cid and c["world_size"] == world)


def _ours(model: str, cid: str, world: int, trace=None):
    case = _case(model, cid, world)
    doc = MODELS[model]
    plan = deepspeed_plan(trace or deepspeed_op_list(doc, case), case,
                          ComputeRequest() if trace else OP_LIST)
    return plan, deepspeed_buckets(plan, case["engine"]["overlap_comm"]), deepspeed_flushes(doc, case)


def test_autocast_sends_two_dtype_streams():
    """torch_autocast bf16 on float32 parameters: Linear gradients in bfloat16, the
    embedding (and the head tied to it) and LayerNorms in float32, two buckets; the profiled
    run and the op list both."""
    trace = load_trace(DEEPSPEED / "ds_autocast_z2.json.gz")
    for given in (None, trace):
        plan, ours, theirs = _ours("gpt_tied", "z2-autocast-bf16", 2, given)
        assert {b[1] for b in ours} == {"bfloat16", "float32"} and same_flushes(ours, theirs)
        assert all(g.dtype == "float32" for g in plan.inp.grads)


def test_communication_data_type_is_not_read_under_autocast():
    plan, ours, theirs = _ours("gpt_tied", "z2-autocast-bf16-comm-fp32", 4)
    assert {b[1] for b in ours} == {"bfloat16", "float32"} and same_flushes(ours, theirs)
    assert any("not read under torch_autocast" in n for n in plan.notes)


@pytest.mark.parametrize("cid,sent", [("z2-bf16-comm-fp32", "float32"), ("z2-fp32-comm-bf16", "bfloat16")])
def test_communication_data_type_both_ways(cid, sent):
    plan, ours, theirs = _ours("gpt_tied", cid, 8)
    assert {b[1] for b in ours} == {sent} and same_flushes(ours, theirs)


@pytest.mark.parametrize("world,elements", [(2, 8252), (3, 8253), (4, 8252), (8, 8256)])
def test_zero3_without_reduce_scatter_still_reduce_scatters_an_oversize_parameter(world, elements):
    """ZeRO-3, reduce_scatter=false: buckets within reduce_bucket_size are all-reduced, but
    wide's 8,251-element weight (past 3,000) is reduce-scattered, padded to W x ceil(n/W)."""
    plan, ours, theirs = _ours("wide", "z3-nors", world)
    big = next(b for b in ours if b[0] == {"wide.weight"})
    assert big[2] == (("reduce_scatter", elements),)
    assert {b[2][0][0] for b in ours if b is not big} == {"allreduce"} and same_flushes(ours, theirs)


def test_zero3_without_reduce_scatter_on_the_profiled_run():
    trace = load_trace(DEEPSPEED / "ds_zero3_nors.json.gz")
    plan, ours, theirs = _ours("wide", "z3-nors", 2, trace)
    assert ("reduce_scatter", 8252) in [b[2][0] for b in ours] and same_flushes(ours, theirs)


@pytest.mark.parametrize("trace", [False, True])
def test_a_split_flush_is_its_pieces_in_the_plan_the_json_and_the_cost(trace, tmp_path):
    """ZeRO-2 at dp 2: wide's 8,251-element weight crosses its partitions and is all-reduced
    as 4,411 + 3,840 elements: two buckets' worth of collectives, each timed on its own."""
    given = load_trace(DEEPSPEED / "ds_split_z2.json.gz") if trace else None
    plan, ours, theirs = _ours("wide", "z2", 2, given)
    assert same_flushes(ours, theirs)
    split = next(b for b in plan.buckets if b.pieces)
    assert [p.nbytes // 4 for p in split.pieces] == [4411, 3840]
    cost = plan.cost
    assert split.end_ms - split.start_ms == pytest.approx(
        cost.time_ms(split.collective, 4411 * 4, False) + cost.time_ms(split.collective, 3840 * 4, True))
    doc = plan.to_json()
    pieces = next(b["pieces"] for b in doc["buckets"] if "pieces" in b)
    assert [p["bytes"] for p in pieces] == [4411 * 4, 3840 * 4]
    assert any("4,411 + 3,840" in n for n in plan.notes)
    out = tmp_path / "plan.json"
    out.write_text(json.dumps(doc))
    from tracecli.planning.planfile import load_plan_file
    saved = load_plan_file(out)
    assert [m.pieces for m in saved.fixed.messages if m.pieces] == [(4411 * 4, 3840 * 4)]


@pytest.mark.parametrize("world,pieces", [(3, [6213, 2038]), (4, [4413, 3838]), (8, [3063, 4062, 1126])])
def test_split_flush_pieces_at_other_world_sizes(world, pieces):
    plan, ours, theirs = _ours("wide", "z2", world)
    assert same_flushes(ours, theirs)
    assert [[p.nbytes // 4 for p in b.pieces] for b in plan.buckets if b.pieces] == [pieces]


def test_the_empty_flush_sends_nothing_and_is_no_bucket():
    """gpt_tied, ZeRO-2, bucket 40,000: the 98,304-element embedding arrives at an empty
    bucket; DeepSpeed flushes it (sending nothing) before setting the embedding aside."""
    case = next(c for c in MODELS["gpt_tied"]["cases"] if any(not f["members"] for f in c["flushes"]))
    plan, ours, theirs = _ours("gpt_tied", case["id"], case["world_size"])
    assert len(ours) == len(theirs) == len([f for f in case["flushes"] if f["members"]]) < len(case["flushes"])
    assert same_flushes(ours, theirs)


def test_stage_1_without_overlap_walks_the_parameter_order():
    for world in (1, 2, 3, 4, 8):
        case = _case("gpt_tied", "z1-nooverlap", world)
        assert case["entered"] == list(range(len(MODELS["gpt_tied"]["params"])))
        plan, ours, theirs = _ours("gpt_tied", "z1-nooverlap", world)
        assert same_flushes(ours, theirs)


def test_each_stage_has_its_hook_order():
    """Stages 1-2 hand a Linear's bias before its weight, ZeRO-3 its weight first: two op
    lists, each giving DeepSpeed's flushes at its stage."""
    z2, z3 = _case("wide", "z2", 2), _case("wide", "z3", 2)
    assert z2["entered"] != z3["entered"]
    for cid in ("z2", "z3"):
        assert same_flushes(*_ours("wide", cid, 2)[1:])


def test_zero3_refuses_parameters_of_several_dtypes(tmp_path):
    """The mixed model's parameters before deepspeed.initialize (ZeRO-1/2 recast its bfloat16
    ones to float32: the record says which): ZeRO-1/2 send one float32 stream; ZeRO-3
    fails in deepspeed.initialize, and so does the plan."""
    doc = MODELS["mixed"]
    side = json.loads((DEEPSPEED / "truth" / doc["sidecars"]["fp32"]).read_text())
    recast = next(c["engine"]["recast"] for c in doc["cases"] if c.get("engine", {}).get("recast"))
    for change, params in recast.items():
        for i in params:
            side[i]["dtype"] = change.split("->")[0]
    path = tmp_path / "mixed.params.json"
    path.write_text(json.dumps(side))
    trace = load(path)
    for case in doc["cases"]:
        if "error" in case:
            with pytest.raises(PlanError, match="ZeRO-3 refuses parameters of several dtypes"):
                deepspeed_plan(trace, case, OP_LIST)
        else:
            assert same_flushes(deepspeed_buckets(deepspeed_plan(trace, case, OP_LIST),
                                                  case["engine"]["overlap_comm"]),
                                deepspeed_flushes(doc, case))
