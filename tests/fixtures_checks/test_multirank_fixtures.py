"""The multi-rank fixtures agree with their own ``truth.json`` (issues 16 and 25).

These tests read the raw files with the standard library only (no tracecli): each file is
the rank its truth says, the injected clock offsets are in the timestamps exactly as
recorded (checked against the ranks' own ``time_ns()``), the injected sleep happened where
the truth says, and each case stays small. tracecli's own tests compare with the truth.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "multirank"
ALL = sorted(p.name for p in ROOT.iterdir() if (p / "truth.json").is_file())
KIND = {c: json.loads((ROOT / c / "truth.json").read_text()).get("kind", "issue16") for c in ALL}
CASES = [c for c in ALL if KIND[c] == "issue16"]            # generate.py (issue 16)
CASES25 = [c for c in ALL if KIND[c] not in ("issue16", "derived_gpu")]  # generate25.py
GPU25 = [c for c in ALL if KIND[c] == "derived_gpu"]          # derive_gpu.py


def load(case: str):
    truth = json.loads((ROOT / case / "truth.json").read_text())
    docs = {int(r): json.loads(gzip.decompress((ROOT / case / name).read_bytes()))
            for r, name in truth["files"].items()}
    return truth, docs


def test_cases_present():
    assert {"gloo2_straggler", "gloo4_straggler_offsets", "gloo2_clean"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_files_are_the_ranks_truth_names(case):
    truth, docs = load(case)
    assert sorted(docs) == list(range(truth["world_size"]))
    for rank, doc in docs.items():
        info = doc["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, truth["world_size"], "gloo")
        steps = sorted(int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                       if str(e.get("name", "")).startswith("ProfilerStep#"))
        assert steps == truth["steps_present"]
        assert doc["baseTimeNanoseconds"] == truth["base_time_ns"][str(rank)]
    assert len({d["baseTimeNanoseconds"] for d in docs.values()}) == 1


@pytest.mark.parametrize("case", CASES + CASES25)
def test_offsets_are_in_the_timestamps(case):
    """ProfilerStep#K opens just before the rank's own time_ns() at the top of iteration K:
    with the recorded offset taken off, the trace's ts lands within a millisecond before it."""
    truth, docs = load(case)
    for rank, doc in docs.items():
        offset = truth["clock_offset_added_us"][str(rank)]
        base = doc["baseTimeNanoseconds"]
        for e in doc["traceEvents"]:
            name = str(e.get("name", ""))
            if e.get("ph") == "X" and name.startswith("ProfilerStep#"):
                mine = truth["steps"][name.split("#")[1]]["ranks"][str(rank)]["time_ns"]
                lead = e["ts"] - offset - (mine["step_start"] - base) / 1000
                assert -1000 < lead <= 0, (rank, name, lead)
    assert truth["clock_offset_us"] == {r: v - truth["clock_offset_added_us"]["0"]
                                        for r, v in truth["clock_offset_added_us"].items()}


@pytest.mark.parametrize("case", CASES)
def test_injected_sleep_is_where_the_truth_says(case):
    truth, _ = load(case)
    injected = {(s["step"], s["rank"]) for s in truth["stragglers"]}
    for s in truth["stragglers"]:
        step = truth["steps"][str(s["step"])]
        assert s["step"] in truth["steps_present"]
        assert s["sleep_ms"] <= s["slept_ms"] < s["sleep_ms"] + 20
        assert step["backward_start_last_rank"] == s["rank"]
        for r, behind in step["backward_start_behind_last_ms"].items():
            if int(r) != s["rank"]:
                assert behind > s["sleep_ms"] / 2, (r, behind)
    for k, step in truth["steps"].items():
        for r, row in step["ranks"].items():
            assert (row["slept_ms"] > 0) == ((int(k), int(r)) in injected)


@pytest.mark.parametrize("case", CASES)
def test_one_gloo_all_reduce_per_bucket_and_step(case):
    truth, docs = load(case)
    per_step = len(truth["ddp_buckets"]) + (1 if truth["second_group"] else 0)
    for doc in docs.values():
        spans = [e for e in doc["traceEvents"] if e.get("name") == "gloo:all_reduce"]
        assert len(spans) == per_step * len(truth["steps_present"])


@pytest.mark.parametrize("case", ALL)
def test_case_is_small(case):
    assert sum(p.stat().st_size for p in (ROOT / case).iterdir()) < 1_000_000


# ---- issue 25 (generate25.py, derive_gpu.py) ----

LAUNCHES = ("c10d::allreduce_", "c10d::alltoall_base_", "c10d::_allgather_base_", "c10d::send",
            "c10d::recv_")
SPANS = ("gloo:all_reduce", "gloo:all_to_all", "gloo:all_gather", "gloo:send", "gloo:recv")


def product(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def profiler_steps(doc) -> dict:
    return {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")}


def in_step(doc, names, window) -> list:
    return sorted((e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name") in names
                   and window[0] <= e["ts"] < window[1]), key=lambda e: e["ts"])


def test_issue25_cases_present():
    assert {"gloo2_alltoallv", "gloo4_alltoallv", "gloo2_pipeline", "gloo4_pipeline_dp",
            "gloo2_threegroups", "gloo4_threegroups", "gloo4_backward_straggler", "gloo2_sleep25",
            "gloo2_clean_twin", "gloo4_missing_rank", "gloo2_diff_cap25",
            "gloo2_diff_cap05"} <= set(CASES25)
    assert GPU25 == ["a100_host_ahead"]


@pytest.mark.parametrize("case", CASES25)
def test_issue25_files_ranks_and_missing_ranks(case):
    truth, docs = load(case)
    world, missing = truth["world_size"], truth["missing_ranks"]
    assert sorted(docs) == [r for r in range(world) if r not in missing]
    assert sorted(p.name for p in (ROOT / case).glob("*.json.gz")) == sorted(truth["files"].values())
    for rank, doc in docs.items():
        info = doc["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, world, "gloo")
        assert sorted(profiler_steps(doc)) == truth["steps_present"]
        assert doc["baseTimeNanoseconds"] == truth["base_time_ns"][str(rank)]
    # what a missing rank measured is still in the truth
    assert sorted(truth["collectives"]) == [str(r) for r in range(world)]
    for step in truth["steps"].values():
        assert sorted(step["ranks"], key=int) == [str(r) for r in range(world)]


@pytest.mark.parametrize("case", CASES25)
def test_issue25_launches_are_the_truths_collectives_in_issue_order(case):
    """On each rank and profiled step, the c10d launch ops on the Python thread are the truth's
    collectives in issue order (kind, elements, all-to-all split sizes, send/recv peer), and the
    gloo spans are the same collectives (kind and elements)."""
    truth, docs = load(case)
    for rank, doc in docs.items():
        steps = profiler_steps(doc)
        for k in truth["steps_present"]:
            mine = [c for c in truth["collectives"][str(rank)] if c["step"] == k]
            assert [c["index"] for c in mine] == list(range(len(mine)))
            got = in_step(doc, LAUNCHES, steps[k])
            assert [e["name"] for e in got] == [c["trace_launch"] for c in mine], (rank, k)
            for e, c in zip(got, mine):
                dims, concrete = e["args"]["Input Dims"], e["args"]["Concrete Inputs"]
                two = c["kind"] in ("all_to_all", "all_gather")
                assert product(dims[1] if two else dims[0][0]) == c["elements"]
                if c["kind"] == "all_to_all":
                    assert json.loads(concrete[3]) == c["output_split_sizes"]
                    assert json.loads(concrete[4]) == c["input_split_sizes"]
                    assert sum(c["input_split_sizes"]) * c["row_elements"] == c["elements"]
                    assert sum(c["output_split_sizes"]) * c["row_elements"] == c["out_elements"]
                if c["kind"] in ("send", "recv"):
                    assert int(concrete[2]) == c["peer"]
            spans = sorted((e["name"], product(e["args"]["Input Dims"][0]))
                           for e in in_step(doc, SPANS, steps[k]))
            assert spans == sorted((c["trace_span"], c["elements"]) for c in mine), (rank, k)


@pytest.mark.parametrize("case", CASES25)
def test_issue25_groups_are_listed_but_no_collective_names_its_group(case):
    """torch 2.13 on gloo: each rank's ``pg_config`` lists the groups it belongs to, and no event
    carries ``Process Group Name``, ``Seq`` or ``Comms Id`` (the truth's groups are the ranks')."""
    truth, docs = load(case)
    for rank, doc in docs.items():
        config = {pg["pg_name"]: pg["ranks"] for pg in doc["distributedInfo"]["pg_config"]}
        member = {g: v["ranks"] for g, v in truth["groups"].items() if rank in v["ranks"]}
        assert {g: config[g] for g in member} == member
        for e in doc["traceEvents"]:
            assert not {"Process Group Name", "Seq", "Comms Id"} & set(e.get("args", {}))
        for c in truth["collectives"][str(rank)]:
            assert c["group_ranks"] == truth["groups"][c["group"]]["ranks"]
            assert rank in c["group_ranks"]


@pytest.mark.parametrize("case", CASES25)
def test_issue25_injections_happened_where_the_truth_says(case):
    truth, docs = load(case)
    done = {(i["step"], i["rank"]) for i in truth["injected"]}
    for inj in truth["injected"]:
        step = truth["steps"][str(inj["step"])]
        assert inj["step"] in truth["steps_present"]
        assert inj["ms"] <= inj["measured_ms"] < inj["ms"] + 20
        if inj["kind"] == "sleep_before_backward":
            assert step["backward_start_last_rank"] == inj["rank"]
            for r, behind in step["backward_start_behind_last_ms"].items():
                assert int(r) == inj["rank"] or behind > inj["ms"] / 2
            continue
        # the spin is inside the named op, on that rank only
        for rank, doc in docs.items():
            ops = in_step(doc, {inj["op"]}, profiler_steps(doc)[inj["step"]])
            assert len(ops) == 4
            op = ops[inj["op_occurrence_in_step_backward"]]
            if rank == inj["rank"]:
                assert op["dur"] >= 1000 * inj["ms"]
                spin = (inj["spin_start_ns"] - doc["baseTimeNanoseconds"]) / 1000
                spin += truth["clock_offset_added_us"][str(rank)]
                assert op["ts"] <= spin <= op["ts"] + op["dur"]
            else:
                assert op["dur"] < 1000 * inj["ms"] / 2
    for k, step in truth["steps"].items():
        for r, row in step["ranks"].items():
            assert (row["slept_ms"] + row["spun_ms"] > 0) == ((int(k), int(r)) in done)


def test_issue25_missing_rank_was_the_late_one():
    truth, docs = load("gloo4_missing_rank")
    assert truth["missing_ranks"] == [2] and 2 not in docs
    assert [(i["rank"], i["step"]) for i in truth["injected"]] == [(2, 3)]


@pytest.mark.parametrize("case", [c for c in CASES25 if c.startswith("gloo2_diff_")])
def test_issue25_diff_pair_carries_ddps_own_bucket_record(case):
    truth, docs = load(case)
    other = json.loads((ROOT / truth["diff_pair"]["other"] / "truth.json").read_text())
    assert truth["bucket_cap_mb"] != other["bucket_cap_mb"]
    assert sum(b["elements"] for b in truth["ddp_buckets"]) == sum(b["elements"] for b in other["ddp_buckets"])
    logging = json.loads((ROOT / case / "ddp_logging.json").read_text())
    assert sorted(logging) == [str(r) for r in range(truth["world_size"])]
    for record in logging.values():
        assert record["bucket_cap_bytes"] == int(truth["bucket_cap_mb"] * 1024 * 1024)
        assert record["rebuilt_bucket_sizes"] == truth["ddp"]["rebuilt_bucket_sizes"]
    for doc in docs.values():
        spans = [e for e in doc["traceEvents"] if e.get("name") == "gloo:all_reduce"]
        assert len(spans) == len(truth["ddp_buckets"]) * len(truth["steps_present"])


def test_issue25_sleep_is_large_against_the_clean_twins_noise():
    clean, _ = load("gloo2_clean_twin")
    noisy, _ = load("gloo2_sleep25")
    assert clean["injected"] == [] and noisy["injected"][0]["ms"] == 25.0
    assert clean["bucket_cap_mb"] == noisy["bucket_cap_mb"] and clean["ddp"] == noisy["ddp"]
    wait = clean["noise"]["trace_gloo_all_reduce_ms"]["wait"]
    assert noisy["injected"][0]["measured_ms"] > 2 * wait["p90"]


def _gpu(case):
    truth = json.loads((ROOT / case / "truth.json").read_text())
    sample = ROOT.parents[2] / truth["derived_from"]
    original = json.loads(gzip.decompress(sample.read_bytes()))
    derived = json.loads(gzip.decompress((ROOT / case / truth["files"]["0"]).read_bytes()))
    return truth, original, derived


@pytest.mark.parametrize("case", GPU25)
def test_derived_gpu_trace_is_the_sample_with_its_device_shifted(case):
    truth, original, derived = _gpu(case)
    gpus = {e["pid"] for e in original["traceEvents"] if e.get("name") == "process_labels"
            and e["args"]["labels"].startswith("GPU")}
    assert sorted(gpus) == truth["device_pids"]
    assert {k: v for k, v in original.items() if k != "traceEvents"} == \
        {k: v for k, v in derived.items() if k != "traceEvents"}
    assert len(original["traceEvents"]) == len(derived["traceEvents"])
    moved = 0
    for a, b in zip(original["traceEvents"], derived["traceEvents"]):
        shift = truth["shift_us"] if a.get("pid") in gpus and a.get("ph") != "M" else 0
        moved += bool(shift)
        assert b.get("ts", 0) - a.get("ts", 0) == pytest.approx(shift, abs=2e-3)
        assert {k: v for k, v in a.items() if k != "ts"} == {k: v for k, v in b.items() if k != "ts"}
    assert moved > 7000


@pytest.mark.parametrize("case", GPU25)
def test_derived_gpu_truth_is_the_devices_own_step(case):
    """Device work per host step by correlation id, read from the derived file: the truth's
    figures, its starts moved by the shift; every activity starts at least the shift after
    its launch."""
    truth, _, derived = _gpu(case)
    events = derived["traceEvents"]
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    host = profiler_steps(derived)
    for k, row in truth["original"]["steps"].items():
        a, b = host[int(k)]
        work = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                and a <= launch[e["args"]["correlation"]] < b]
        assert len(work) == row["device_activities"]
        assert min(e["ts"] for e in work) == pytest.approx(truth["derived_device_start_us"][k], abs=2e-3)
        assert max(e["ts"] + e["dur"] for e in work) - min(e["ts"] for e in work) == \
            pytest.approx(row["device_span_us"], abs=2e-3)
        assert min(e["ts"] - launch[e["args"]["correlation"]] for e in work) >= truth["shift_us"]
        assert row["host_step_start_us"] == a
    periods = truth["original"]["device_step_period_us"]
    starts = [truth["derived_device_start_us"][k] for k in sorted(truth["derived_device_start_us"], key=int)]
    assert [round(y - x, 3) for x, y in zip(starts, starts[1:])] == pytest.approx(periods, abs=2e-3)


@pytest.mark.parametrize("case", CASES25)
def test_issue25_a_gloo_spans_thread_is_its_groups(case):
    """Each collective span (not send/recv, which run on the calling thread) is on a thread its
    group's creation started, and that group issued a collective of that kind and size."""
    truth, docs = load(case)
    for rank, doc in docs.items():
        owner = {int(tid): g for g, started in truth["group_threads"][str(rank)].items()
                 for tid in started}
        issued = {(c["group"], c["trace_span"], c["elements"]) for c in truth["collectives"][str(rank)]}
        spans = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name") in SPANS
                 and e["name"] not in ("gloo:send", "gloo:recv")]
        for e in spans:
            assert (owner[e["tid"]], e["name"], product(e["args"]["Input Dims"][0])) in issued
