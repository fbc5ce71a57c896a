"""Self-checks of the frameworks' recorded answers (``fixtures/megatron/truth``,
``fixtures/megatron/mc_*``, ``fixtures/deepspeed/truth``, ``fixtures/deepspeed/ds_*``):
standard library only, no tracecli, no torch.

Each file is what Megatron-Core 0.16.1 or DeepSpeed 0.19.8 did (see the fixtures' READMEs
and generators). These tests hold the records to the rules the READMEs state with their
source lines, re-derived here in a few lines each, and to the records' own bookkeeping
(every parameter in one bucket, sizes that add up, sidecars that name the same
parameters): a record that contradicts the documented rule, or a rule misread from the
source, fails here before any tracecli test relies on it.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from framework_answers import record as load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MEGATRON = sorted((FIXTURES / "megatron" / "truth").glob("*.megatron-truth.json*")) + \
    sorted((FIXTURES / "megatron").glob("mc_*.megatron-truth.json"))
DEEPSPEED = sorted((FIXTURES / "deepspeed" / "truth").glob("*.deepspeed-truth.json*")) + \
    sorted((FIXTURES / "deepspeed").glob("ds_*.deepspeed-truth.json"))


def sidecar(path: Path, name: str) -> list[dict]:
    return json.loads((path.parent / name).read_text())


def ids(paths):
    return [p.name for p in paths]


def test_every_model_and_trace_is_there():
    assert {load(p)["model"] for p in MEGATRON} >= {
        "gpt_stage0", "gpt_stage0_small", "moe", "mixed", "huge", "tiny"}
    assert {load(p)["model"] for p in DEEPSPEED} >= {"gpt_tied", "wide", "tiny", "mixed"}
    for name in ("mc_gpt_stage0_small", "mc_moe", "mc_mixed", "mc_tiny"):
        assert (FIXTURES / "megatron" / f"{name}.json.gz").is_file()
    for name in ("ds_autocast_z2", "ds_zero3_nors", "ds_split_z2"):
        assert (FIXTURES / "deepspeed" / f"{name}.json.gz").is_file()


# -- Megatron-Core ---------------------------------------------------------------------------

def megatron_layout(numels, shared, bucket_size, distopt, dp, busbw):
    """param_and_grad_buffer.py l.635-740: the reversed walk of one buffer: (members,
    numel, numel_unpadded) a bucket."""
    pad = lambda n, d: -(-n // d) * d  # noqa: E731
    divisor = math.lcm(dp, 128, 2 ** 16) if busbw else math.lcm(dp, 128)
    out, members, start, at = [], [], 0, 0

    def close(end):
        nonlocal start, members
        padded = pad(end, divisor) if distopt else end
        out.append((members, padded - start, end - start))
        start, members = padded, []
        return padded

    for i in reversed(range(len(numels))):
        if distopt:
            at = pad(at, 64)
        alone = shared[i] and distopt
        if alone and members:
            at = close(at)
        members.append(i)
        end = at + numels[i]
        if (bucket_size is not None and end - start >= bucket_size) or alone:
            at = close(end)
        else:
            at = end
    if members:
        close(end)
    return out


@pytest.mark.parametrize("path", MEGATRON, ids=ids(MEGATRON))
def test_megatron_record(path):
    doc = load(path)
    assert doc["schema"] == "megatron-truth/1" and doc["megatron_core"] == "0.16.1"
    params = sidecar(path, doc["sizes"])
    assert [p["name"] for p in params] == doc["params"]
    n = len(params)
    numel = [math.prod(p["shape"]) for p in params]
    assert sorted(doc["ready_order"]) == list(range(n))
    if "ops" in doc:  # the op list is the recorded readiness, in Horovod's form
        lines = (path.parent / doc["ops"]).read_text().split()
        handed = [int(m.group(1) or 0) for m in map(re.compile(r"Allreduce/cond(?:_(\d+))?/").search, lines) if m]
        assert handed == doc["ready_order"]
    for s in doc["settings"]:
        check_megatron_setting(s, params, numel, doc["ready_order"])


def check_megatron_setting(s, params, numel, ready):
    n = len(params)
    label = {k: v for k, v in s.items() if k not in ("buckets", "launches")}
    buckets = s["buckets"]
    assert sorted(i for b in buckets for i in b["members"]) == list(range(n)), label
    # bucket_size: distributed_data_parallel.py l.64-68
    default = max(40_000_000, 1_000_000 * s["dp"])
    assert s["bucket_size_used"] == ((s["bucket_size"] or default) if s["overlap_grad_reduce"] else None)
    # buffers: dense first then expert; each (param dtype, grad dtype) in first-appearance order
    expert = [p.get("expert", False) for p in params]
    buffers = {}
    for b in buckets:
        buffers.setdefault(b["buffer_index"], []).append(b)
        assert all(expert[i] == (b["buffer"] == "expert") for i in b["members"]), label
        assert all(params[i]["dtype"] == b["param_dtype"] for i in b["members"]), label
        assert b["grad_dtype"] == ("float32" if s["grad_reduce_in_fp32"] else b["param_dtype"])
    keys = []
    for i, p in enumerate(params):
        key = (expert[i], p["dtype"])
        if key not in keys:
            keys.append(key)
    keys.sort(key=lambda k: k[0])  # dense buffers, then expert buffers
    assert [(b[0]["buffer"] == "expert", b[0]["param_dtype"]) for _, b in sorted(buffers.items())] == keys
    for (is_expert, dtype), (_, group) in zip(keys, sorted(buffers.items())):
        own = [i for i, p in enumerate(params) if expert[i] == is_expert and p["dtype"] == dtype]
        ranks = s["expert_dp"] if is_expert else s["dp"]
        expected = megatron_layout([numel[i] for i in own],
                                   [params[i].get("shared_embedding", False) for i in own],
                                   s["bucket_size_used"], s["use_distributed_optimizer"], ranks,
                                   s["pad_buckets_for_high_nccl_busbw"])
        got = [([own.index(i) for i in b["members"]], b["numel"], b["numel_unpadded"]) for b in group]
        assert got == expected, label
        assert [b["offset"] for b in group] == [sum(b["numel"] for b in group[:k]) for k in range(len(group))]
    # launches: every bucket once, as its group completes (register_grad_ready, l.539-562)
    # or, without overlap, in group order at finish_grad_sync (l.518-522)
    launches = s["launches"]
    assert sorted(x["group"] for x in launches) == [b["group"] for b in buckets]
    for x in launches:
        b = buckets[x["group"]]
        ranks = s["expert_dp"] if b["buffer"] == "expert" else s["dp"]
        assert x["collective"] == ("reduce_scatter" if s["use_distributed_optimizer"] else "all_reduce")
        assert (x["elements"], x["dtype"], x["ranks"]) == (b["numel"], b["grad_dtype"], ranks)
        assert x["output_elements"] == (x["elements"] // ranks if s["use_distributed_optimizer"] else x["elements"])
        assert x["during_backward"] == x["async"] == s["overlap_grad_reduce"]
    place = {i: k for k, i in enumerate(ready)}
    if s["overlap_grad_reduce"]:
        last = [max(b["members"], key=place.get) for b in buckets]
        assert [x["group"] for x in launches] == sorted(range(len(buckets)), key=lambda k: place[last[k]])
        assert [x["after"] for x in launches] == [last[x["group"]] for x in launches]
    else:
        assert [x["group"] for x in launches] == list(range(len(buckets)))
    if "first_step_launch_order" in s:  # the first step reduces everything at its end
        assert s["first_step_launch_order"] == list(range(len(buckets)))


def test_megatron_marks_are_megatrons():
    gpt = load(FIXTURES / "megatron" / "truth" / "gpt_stage0_small.megatron-truth.json")
    marks = sidecar(FIXTURES / "megatron" / "truth" / "x", gpt["sizes"])
    assert [p["name"] for p in marks if p.get("shared_embedding")] == \
        ["module.embedding.word_embeddings.weight"]
    moe = sidecar(FIXTURES / "megatron" / "truth" / "x", "moe.sizes.json")
    experts = [p["name"] for p in moe if p.get("expert")]
    assert experts and all(".mlp.experts.local_experts." in n for n in experts)
    assert not any("router" in n or "final_layernorm" in n for n in experts)


# -- DeepSpeed -------------------------------------------------------------------------------

def ds_flushes(entered, numel, comm, stage, size):
    """stage_1_and_2.py l.1414-1427 / stage3.py l.1569-1588: flush a dtype's bucket before
    a parameter that would pass ``reduce_bucket_size`` (stage 3: only a non-empty one); the
    end of backward flushes the rest, dtypes sorted by ``str(dtype)`` (torch_autocast.py
    ``sort_dtypes``). (members, dtype, flushed by)."""
    buckets, out = {}, []

    def flush(d, by):
        members = buckets.pop(d, [])
        if members:
            out.append((members, d, by))

    for i in entered:
        held = sum(numel[k] for k in buckets.get(comm[i], []))
        if held + numel[i] > size and (stage < 3 or held > 0):
            flush(comm[i], i)
        buckets.setdefault(comm[i], []).append(i)
    for d in sorted(buckets, key=lambda d: f"torch.{d}"):
        flush(d, None)
    return out


def ds_pieces(members, numel, order, part, size):
    """average_tensor (l.1590-1713): each member cut at the ZeRO-1/2 partitions (``part``
    elements of the group flattened in ``order``), then allreduce_and_scatter (l.1545-1588):
    add a slice, send once past ``size``, the rest last."""
    offset = {i: sum(numel[k] for k in order[:order.index(i)]) for i in members}
    sends, acc = [], 0
    for i in members:
        at, end = offset[i], offset[i] + numel[i]
        while at < end:
            cut = min(end, (at // part + 1) * part)
            acc += cut - at
            at = cut
            if acc > size:
                sends.append(acc)
                acc = 0
    return sends + ([acc] if acc else [])


@pytest.mark.parametrize("path", DEEPSPEED, ids=ids(DEEPSPEED))
def test_deepspeed_record(path):
    doc = load(path)
    assert doc["schema"] == "deepspeed-truth/1" and doc["deepspeed"] == "0.19.8"
    for case in doc["cases"]:
        assert "ranks_differ" not in case, case["id"]
        if "error" in case:
            assert isinstance(case["error"], str) and case["error"]
            continue
        check_deepspeed_case(case, sidecar(path, case["sizes"]), doc["params"])
        if case["stage"] == 1 and not case["engine"]["overlap_comm"]:
            continue
        kind = ("zero3" if case["stage"] == 3 else "zero12") + \
            ("-autocast" if case["precision"].startswith("autocast") else "")
        ops = path.parent / f"{doc['model']}.{kind}.ops.txt"
        if path.parent.name == "truth":  # the op list is the recorded hook order
            handed = [int(m.group(1) or 0) for m in map(re.compile(r"Allreduce/cond(?:_(\d+))?/").search,
                                                           ops.read_text().split()) if m]
            assert handed == case["entered"], (case["id"], case["world_size"])


def check_deepspeed_case(case, params, names):
    label = (case["id"], case["world_size"])
    assert [p["name"] for p in params] == names
    n, w, stage = len(params), case["world_size"], case["stage"]
    numel = [math.prod(p["shape"]) for p in params]
    comm = [p.get("comm_dtype", p["dtype"]) for p in params]
    engine = case["engine"]
    size = engine["reduce_bucket_size"]
    assert size == case["config"]["zero_optimization"].get("reduce_bucket_size", 500_000_000)
    assert sorted(engine["ipg_bucket_dtypes"]) == sorted(set(comm))
    assert sorted(case["entered"]) == list(range(n)), label
    if stage == 1 and not engine["overlap_comm"]:  # reduce_gradients walks the groups
        assert case["entered"] == [i for g in engine["groups"] for i in g], label
    # stages 1-2 flush an empty bucket before a parameter past the size that arrives first
    # (l.1422-1424): average_tensor of nothing, which sends nothing
    assert all(f["sent"] == [] and stage < 3 for f in case["flushes"] if not f["members"])
    flushes = [f for f in case["flushes"] if f["members"]]
    expected = ds_flushes(case["entered"], numel, comm, stage, size)
    assert [(f["members"], f["comm_dtype"], f["by"]) for f in flushes] == expected, label
    for f in flushes:
        elements = sum(numel[i] for i in f["members"])
        assert f["elements"] == elements, label
        sent = f["sent"]
        assert all(s["dtype"] == f["comm_dtype"] and s["ranks"] == w for s in sent), label
        if stage == 3 and (engine["reduce_scatter"] or elements > size):
            # reduce_scatter_coalesced: W x sum(ceil(numel / W)), one call (stage3.py
            # l.1673-1678, coalesced_collectives.py l.81-131)
            padded = w * sum(-(-numel[i] // w) for i in f["members"])
            assert [(s["op"], s["elements"], s["output_elements"]) for s in sent] == \
                [("reduce_scatter_tensor", padded, padded // w)], label
        elif stage < 3 and engine["reduce_scatter"]:
            order = [i for g in engine["groups"] for i in g]
            pieces = ds_pieces(f["members"], numel, order, engine["partition_size"][0], size)
            assert [(s["op"], s["elements"]) for s in sent] == [("all_reduce", x) for x in pieces], label
        else:  # one all-reduce of the bucket (gradient_reduction_w_predivide, stage 3's
            # __avg_scatter_contiguous_grads)
            assert [(s["op"], s["elements"]) for s in sent] == [("all_reduce", elements)], label


def test_deepspeed_autocast_marks_are_deepspeeds():
    """init_autocast_params marks the parameters of Linear (and Conv) modules with the
    autocast dtype; the embedding (also the tied head) and LayerNorms keep float32."""
    marks = json.loads((FIXTURES / "deepspeed" / "truth" / "gpt_tied.autocast-bf16.sizes.json").read_text())
    low = {p["name"] for p in marks if p.get("comm_dtype") == "bfloat16"}
    assert low == {p["name"] for p in marks if re.search(r"\.(qkv|proj|fc_in|fc_out)\.", p["name"])}
    assert all(p["dtype"] == "float32" for p in marks)
