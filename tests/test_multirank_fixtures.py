"""The multi-rank fixtures agree with their own ``truth.json`` (issue 16).

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

ROOT = Path(__file__).resolve().parent / "fixtures" / "multirank"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "truth.json").is_file())


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


@pytest.mark.parametrize("case", CASES)
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


@pytest.mark.parametrize("case", CASES)
def test_case_is_small(case):
    assert sum(p.stat().st_size for p in (ROOT / case).iterdir()) < 1_000_000
