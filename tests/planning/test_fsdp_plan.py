"""``--strategy fsdp2`` and ``--strategy fsdp1`` (issue 27 items 2-3), against torch.

On every fixture and rank, the plan's collectives (``collective``, ``phase``, ``unit``,
``elements``, ``dtype``, in launch order) are torch's own record of the run; and each knob
does what FSDP does: planned from one run's trace with a knob set, the plan is the record of
the fixture that ran with that setting (resharding false/true/int, mixed precision, the
mesh, the world size, FSDP1's prefetch modes).
"""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, VGG, assert_error, run
from test_fsdp_read import CASES, contract, record, sidecar, torch_sequence

ROOT = FIXTURES / "fsdp"


def plan(case: str, tmp_path, *args) -> dict:
    result = run("plan-buckets", ROOT / case / "rank0.json.gz", "--json",
                 "--sizes", sidecar(case, tmp_path), *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", CASES)
def test_the_strategy_is_torchs_record_on_every_rank(case, tmp_path):
    rec = record(case)
    side = sidecar(case, tmp_path)
    for rank, name in sorted(rec["files"].items()):
        result = run("plan-buckets", ROOT / case / name, "--strategy", rec["system"], "--json",
                     "--sizes", side)
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert contract(doc) == torch_sequence(rec, rank, 3), (case, rank)
        assert [b["group_size"] for b in doc["buckets"]] == \
            [e["group_size"] for e in rec["collectives"][rank] if e["step"] == 3]
        assert doc["fsdp"]["shard_size"] == rec["units"][0].get("shard_size", rec["world_size"])


KNOBS = [
    ("fsdp2_default", ["--fsdp-reshard-after-forward", "false"], "fsdp2_no_reshard"),
    ("fsdp2_no_reshard", ["--fsdp-reshard-after-forward", "true"], "fsdp2_default"),
    ("fsdp2_default", ["--fsdp-param-dtype", "bfloat16", "--fsdp-reduce-dtype", "float32"],
     "fsdp2_mixed_precision"),
    ("fsdp2_mixed_precision", ["--fsdp-param-dtype", "float32"], "fsdp2_default"),
    ("fsdp2_4ranks", ["--fsdp-reshard-after-forward", "2"], "fsdp2_reshard_int"),
    ("fsdp2_reshard_int", ["--fsdp-reshard-after-forward", "true"], "fsdp2_4ranks"),
    ("fsdp2_4ranks", ["--fsdp-mesh", "2,2"], "hsdp_2x2"),
    ("hsdp_2x2", ["--fsdp-mesh", "4"], "fsdp2_4ranks"),
    ("fsdp2_default", ["--gpus", "4"], "fsdp2_4ranks"),
    ("fsdp2_4ranks", ["--gpus", "2"], "fsdp2_default"),
]


@pytest.mark.parametrize("source, args, target", KNOBS)
def test_a_knob_turns_one_run_into_another(source, args, target, tmp_path):
    doc = plan(source, tmp_path, "--strategy", "fsdp2", *args)
    assert contract(doc) == torch_sequence(record(target), "0", 3)


@pytest.mark.parametrize("source, args, target", [
    ("fsdp1_orig_params", ["--fsdp1-backward-prefetch", "post", "--fsdp1-forward-prefetch", "true"],
     "fsdp1_backward_post"),
    ("fsdp1_backward_post", ["--fsdp1-backward-prefetch", "pre", "--fsdp1-forward-prefetch", "false"],
     "fsdp1_orig_params"),
])
def test_fsdp1_prefetch_modes_turn_one_run_into_another(source, args, target, tmp_path):
    """The two runs' flat parameters differ (alignment padding): sizes aside, equal."""
    doc = plan(source, tmp_path, "--strategy", "fsdp1", *args)
    strip = [(k, p, u, d) for k, p, u, _, d in contract(doc)]
    assert strip == [(k, p, u, d) for k, p, u, _, d in torch_sequence(record(target), "0", 3)]


def test_explicit_prefetch_depth_and_implicit(tmp_path):
    implicit = plan("fsdp2_explicit_prefetch", tmp_path, "--strategy", "fsdp2",
                    "--fsdp-prefetch", "implicit")
    kinds = [(k, p, u) for k, p, u, _, _ in contract(implicit)]
    assert kinds[:4] == [("allgather", "forward", u) for u in ("root", "blocks.0", "blocks.1", "blocks.2")]
    assert [u for k, p, u in kinds if p == "backward" and k == "allgather"] == \
        ["blocks.2", "blocks.1", "blocks.0"]
    assert implicit["fsdp"]["units"][1]["backward_prefetch"] is None
    deep = plan("fsdp2_explicit_prefetch", tmp_path, "--strategy", "fsdp2", "--fsdp-prefetch", "2")
    assert deep["fsdp"]["units"][0]["forward_prefetch"] == ["blocks.0", "blocks.1"]
    assert deep["fsdp"]["units"][3]["backward_prefetch"] == ["blocks.1", "blocks.0"]
    assert any("set_modules_to_forward_prefetch" in line for line in deep["fsdp"]["paste"])


def test_the_timeline_waits_for_all_gathers_and_memory_grows_without_resharding(tmp_path):
    slow = ["--alpha-us", "200", "--bandwidth-gbps", "0.05"]
    doc = plan("fsdp2_default", tmp_path, "--strategy", "fsdp2", *slow)
    first = doc["buckets"][0]
    assert first["unit"] == "root" and first["start_ms"] == 0.0
    assert doc["predicted"]["exposed_comm_ms"] > 0
    channels = {b["channel"] for b in doc["buckets"]}
    assert channels == {"allgather", "reducescatter"}
    for b in doc["buckets"]:  # each channel runs one collective at a time, in order
        same = [c for c in doc["buckets"] if c["channel"] == b["channel"] and c["index"] < b["index"]]
        assert all(c["end_ms"] <= b["start_ms"] + 1e-9 for c in same)
    three = ["--strategy", "fsdp2", "--fsdp-prefetch", "implicit"]
    free = plan("fsdp2_explicit_prefetch", tmp_path, *three)
    keep = plan("fsdp2_explicit_prefetch", tmp_path, *three, "--fsdp-reshard-after-forward", "false")
    # 3 blocks: kept, all three are held when backward starts; resharded, two are, beside
    # the retained reduce-scatter buffer (as much as the third): a tie
    assert keep["fsdp"]["memory"]["peak_bytes"] >= free["fsdp"]["memory"]["peak_bytes"]
    assert keep["fsdp"]["memory"]["sharded_bytes"] == free["fsdp"]["memory"]["sharded_bytes"]
    hsdp = plan("hsdp_2x2", tmp_path, "--strategy", "fsdp2", *slow)
    for b in hsdp["buckets"]:
        if b["collective"] == "allreduce":  # after its own reduce-scatter
            rs = next(c for c in hsdp["buckets"] if c["collective"] == "reducescatter"
                      and c["unit"] == b["unit"])
            assert b["ready_ms"] >= rs["end_ms"] - 1e-9


@pytest.mark.parametrize("args, words", [
    (["--strategy", "fsdp2", "--fsdp-wrap", "blocks.7"], ("blocks.7", "not one of the run's units")),
    (["--strategy", "fsdp2", "--fsdp-mesh", "3,3"], ("--fsdp-mesh", "9 ranks")),
    (["--strategy", "fsdp2", "--fsdp-reshard-after-forward", "3"], ("--fsdp-reshard-after-forward",)),
    (["--strategy", "fsdp2", "--fsdp-param-dtype", "float13"], ("--fsdp-param-dtype",)),
    (["--strategy", "fsdp2", "--fsdp-prefetch", "deep"], ("--fsdp-prefetch",)),
    (["--strategy", "fsdp1"], ("FSDP2 run", "--strategy fsdp2")),
])
def test_bad_fsdp_options_are_one_line(args, words):
    result = run("plan-buckets", ROOT / "fsdp2_4ranks" / "rank0.json.gz", *args)
    assert_error(result, "tracecli: ", *words)


def test_fsdp_on_a_trace_without_fsdp_is_one_line():
    result = run("plan-buckets", VGG, "--strategy", "fsdp2")
    assert_error(result, "tracecli: ", "FSDP", "--strategy fsdp2")
