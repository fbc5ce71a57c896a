"""``--strategy megatron`` against Megatron-Core 0.16.1's own buckets and launches
(``fixtures/megatron/truth``: 468 settings of six models, dp 1 to 1,024, recorded through
Megatron's own ``DistributedDataParallel`` and backward hooks; ``mc_*``: 2-rank gloo runs
with their profiler traces), on each input a user has:

- the op list + sidecar path (``truth/MODEL.ops.txt``: the recorded readiness in Horovod's
  form, ``truth/MODEL.sizes.json`` with Megatron's marks);
- the profiler-trace path (``mc_MODEL.json.gz`` and its sidecar);
- the parameter list alone (``truth/MODEL.sizes.json`` as the trace), where readiness is what
  Megatron assumes: the reverse of ``named_parameters()``.

Compared per launch: members, elements sent (padding included), dtype, collective, launch
order, and the parameter whose gradient launched it.
"""

from __future__ import annotations

import pytest

from framework_answers import (
    MEGATRON, OP_LIST, megatron_buckets, megatron_launches, megatron_op_list, megatron_params,
    megatron_plan, megatron_trace, record, truth_files,
)
from tracecli.pipeline import ComputeRequest

TRUTH = truth_files(MEGATRON / "truth", "megatron")
TRACES = truth_files(MEGATRON, "megatron")  # mc_*: one setting each, the real run's


def differing(doc: dict, trace, compute) -> list[tuple]:
    """Every setting of ``doc`` where tracecli's plan is not Megatron's: (setting, ours, theirs)."""
    out = []
    for s in doc["settings"]:
        ours = megatron_buckets(megatron_plan(trace, s, compute), s["overlap_grad_reduce"])
        theirs = megatron_launches(doc, s)
        if ours != theirs:
            out.append(({k: v for k, v in s.items() if k not in ("buckets", "launches")}, ours, theirs))
    return out


@pytest.mark.parametrize("path", TRUTH, ids=lambda p: p.name.split(".")[0])
def test_the_op_list_path_is_megatron(path):
    doc = record(path)
    bad = differing(doc, megatron_op_list(doc), OP_LIST)
    assert not bad, f"{len(bad)} of {len(doc['settings'])} settings differ, e.g. {bad[0]}"


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.split(".")[0])
def test_the_profiler_trace_path_is_megatron(path):
    doc = record(path)
    assert not differing(doc, megatron_trace(doc), ComputeRequest())


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.split(".")[0])
def test_the_profiled_step_gives_megatrons_launches_for_every_setting_of_its_model(path):
    """The trace of a model's real run (one setting) planned under each of the settings
    Megatron ran that model with (``truth/MODEL``: dp 1 to 1,024, buckets, distributed
    optimizer, fp32 reduction, overlap): backward's order is the model's, not the setting's,
    so every launch is Megatron's, launching parameter included."""
    doc = record(path)
    full = record(next((MEGATRON / "truth").glob(f"{doc['model']}.megatron-truth.json*")))
    assert full["params"] == doc["params"]
    bad = differing(full, megatron_trace(doc), ComputeRequest())
    assert not bad, f"{len(bad)} of {len(full['settings'])} settings differ, e.g. {bad[0]}"


@pytest.mark.parametrize("path", TRUTH, ids=lambda p: p.name.split(".")[0])
def test_the_parameter_list_alone_gives_megatrons_buckets(path):
    """No trace: every bucket is Megatron's (its layout needs no timing). Launches follow
    Megatron's own rule under the readiness it assumes, the reverse of ``named_parameters()``:
    a bucket leaves when its earliest-registered parameter is ready; without
    ``overlap_grad_reduce`` all leave after backward in bucket-group order, as recorded."""
    doc = record(path)
    trace = megatron_params(doc)
    place = {name: i for i, name in enumerate(doc["params"])}
    for s in doc["settings"]:
        ours = megatron_buckets(megatron_plan(trace, s, OP_LIST), s["overlap_grad_reduce"])
        theirs = megatron_launches(doc, s)
        assert sorted(ours, key=repr) and {b[:4] for b in ours} == {b[:4] for b in theirs}
        assert len(ours) == len(theirs)
        if not s["overlap_grad_reduce"]:
            assert ours == theirs
            continue
        assumed = sorted(theirs, key=lambda b: -min(place[n] for n in b[0]))
        assert [b[:4] for b in ours] == [b[:4] for b in assumed]
        assert [b[4] for b in ours] == [min(b[0], key=place.get) for b in assumed]


def test_the_plans_say_they_model_a_step_without_a_profile():
    doc = record(MEGATRON / "truth" / "huge.megatron-truth.json")
    plan = megatron_plan(megatron_params(doc), doc["settings"][0], ComputeRequest())
    assert plan.inp.compute_source.startswith("a model without a profile")
    trace = megatron_params(doc)
    assert trace.format == "params" and "no trace" in trace.meta.notes[0]


# -- the cases the independent check found wrong, one by one -----------------------------------

def _setting(doc, **want):
    found = [s for s in doc["settings"] if all(s[k] == v for k, v in want.items())]
    assert len(found) == 1, want
    return found[0]


@pytest.mark.parametrize("load_with", [megatron_op_list, megatron_params])
def test_gpt_first_stage_sends_the_shared_embedding_alone_and_last(load_with):
    """GPT first stage, dp 8, distributed optimizer, fp32 reduction, bucket 4M: six
    reduce-scatters, the word embedding (shared_embedding) alone, last; the op list lost
    the mark and merged it into a 77,754,368-element bucket."""
    doc = record(MEGATRON / "truth" / "gpt_stage0.megatron-truth.json.gz")
    s = _setting(doc, dp=8, use_distributed_optimizer=True, grad_reduce_in_fp32=True,
                 bucket_size=4_000_000, pad_buckets_for_high_nccl_busbw=False)
    ours = megatron_buckets(megatron_plan(load_with(doc), s, OP_LIST), True)
    assert [b[3] for b in ours] == ["reduce_scatter"] * 6
    assert ours[-1][0] == {"module.embedding.word_embeddings.weight"} and ours[-1][1] == 24_576_000
    assert ours[-1][2] == "float32"
    assert [b[:4] for b in ours] == [b[:4] for b in megatron_launches(doc, s)]


def test_moe_experts_have_buffers_of_their_own_on_the_op_list_path():
    """MoE, dp 8, expert parallel 2 (expert dp 4), no overlap: the dense buffer and the expert buffer, the
    experts' padded to expert dp (the op list lost the expert marks: one bucket of all 50)."""
    doc = record(MEGATRON / "truth" / "moe.megatron-truth.json.gz")
    s = _setting(doc, dp=8, expert_dp=4, use_distributed_optimizer=True, grad_reduce_in_fp32=False,
                 overlap_grad_reduce=False, pad_buckets_for_high_nccl_busbw=False)
    plan = megatron_plan(megatron_op_list(doc), s, OP_LIST)
    experts = {g.name for g in plan.inp.grads if g.meta.expert}
    assert experts and all(".local_experts." in n for n in experts)
    ours = megatron_buckets(plan, False)
    assert len(ours) == 2 and ours[1][0] == experts
    assert ours == megatron_launches(doc, s)


def test_tiny_at_dp_1024_is_91_buckets():
    """1,537 parameters of 1-7 elements, dp 1,024, distributed optimizer, bucket_size 1,000:
    every bucket padded to a multiple of lcm(1024, 128), which the size test counts."""
    doc = record(MEGATRON / "truth" / "tiny.megatron-truth.json.gz")
    s = _setting(doc, dp=1024, use_distributed_optimizer=True, bucket_size=1000)
    ours = megatron_buckets(megatron_plan(megatron_op_list(doc), s, OP_LIST), True)
    assert len(ours) == 91 and all(b[1] % 1024 == 0 for b in ours)
    assert ours == megatron_launches(doc, s)


def test_a_bucket_leaves_when_its_last_ready_gradient_is_ready():
    """gpt_stage0_small, bucket_size 20k: its third bucket holds parameters 18-21; Megatron
    launches it after parameter 19's hook (ready after 18's: the LayerNorm's bias after its
    weight), not after 18 as the reversed walk assumes. The op list's hand-offs each
    advance backward, so tracecli's bucket is ready at 19's gradient too."""
    doc = record(MEGATRON / "truth" / "gpt_stage0_small.megatron-truth.json")
    s = _setting(doc, dp=1, use_distributed_optimizer=False, overlap_grad_reduce=True,
                 bucket_size=20_000, grad_reduce_in_fp32=False)
    theirs = megatron_launches(doc, s)
    assert theirs[2][4] == doc["params"][19]
    ours = megatron_buckets(megatron_plan(megatron_op_list(doc), s, OP_LIST), True)
    assert ours[2][4] == doc["params"][19] and ours == theirs


@pytest.mark.parametrize("name", ["mixed", "huge"])
def test_mixed_dtypes_and_huge_parameters(name):
    doc = record(next(p for p in TRUTH if p.name.startswith(name + ".")))
    trace = megatron_op_list(doc)
    for s in doc["settings"]:
        assert megatron_buckets(megatron_plan(trace, s, OP_LIST), s["overlap_grad_reduce"]) == \
            megatron_launches(doc, s)
