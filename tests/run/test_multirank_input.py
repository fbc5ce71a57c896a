"""``benchmarks/multirank_input.py`` writes a valid, matchable run (issue 16's scale input):
each rank says its rank, the steps repeat renumbered, every rank has the same collectives in
the same order, and a copied rank is its source rank moved by exactly the offset it says."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("multirank_input", ROOT / "benchmarks" / "multirank_input.py")
multirank_input = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(multirank_input)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    made = multirank_input.make_run(out, ranks=6, megabytes=1.0)
    docs = {r: json.loads((out / made["ranks"][str(r)]["file"]).read_text()) for r in range(6)}
    return made, docs


def _collectives(doc):
    spans = sorted((e for e in doc["traceEvents"] if e.get("name") == "gloo:all_reduce"),
                   key=lambda e: e["ts"])
    return [(e["ts"], e["dur"], e["args"]["Input Dims"][0][0]) for e in spans]


def test_each_file_is_its_rank_of_the_new_world(run):
    made, docs = run
    for r, doc in docs.items():
        info = doc["distributedInfo"]
        assert (info["rank"], info["world_size"]) == (r, 6)
        assert info["pg_config"][0]["ranks"] == list(range(6))
        steps = [int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                 if str(e.get("name", "")).startswith("ProfilerStep#")]
        assert sorted(steps) == made["steps"] == list(range(2, 2 + len(steps)))
    assert len({d["trace_id"] for d in docs.values()}) == 6
    assert len({e["pid"] for d in docs.values() for e in d["traceEvents"][:1]}) == 6


def test_size_is_near_the_target(run):
    made, _ = run
    for rank in made["ranks"].values():
        assert 0.75e6 < rank["json_bytes"] == rank["bytes"] < 1.25e6


def test_same_collectives_on_every_rank(run):
    made, docs = run
    rows = [_collectives(d) for d in docs.values()]
    assert len(rows[0]) == 3 * len(made["steps"])
    assert all([n for _, _, n in row] == [n for _, _, n in rows[0]] for row in rows)


def test_a_copied_rank_is_its_source_moved_by_its_offset(run):
    made, docs = run
    for r in (4, 5):
        src = made["ranks"][str(r)]["source_rank"]
        added = made["ranks"][str(r)]["offset_added_us"]
        assert added != 0 and src == r - 4
        for (ts, dur, n), (ts0, dur0, n0) in zip(_collectives(docs[r]), _collectives(docs[src])):
            assert (dur, n) == (dur0, n0)
            assert ts - ts0 == pytest.approx(added, abs=2e-3)
    truth = json.loads((multirank_input.DEFAULT_SOURCE / "truth.json").read_text())
    assert made["clock_offset_us"]["5"] == truth["clock_offset_us"]["1"] + made["ranks"]["5"]["offset_added_us"]


def test_copies_repeat_the_source_steps_a_period_apart(run):
    made, docs = run
    starts = {int(e["name"].split("#")[1]): e["ts"] for e in docs[0]["traceEvents"]
              if str(e.get("name", "")).startswith("ProfilerStep#")}
    per = made["steps_per_copy"]
    for k in made["steps"][per:]:
        assert starts[k] - starts[k - per] == pytest.approx(made["period_us"], abs=2e-3)
    assert [s["step"] for s in made["stragglers"][:2]] == [3, 4]
