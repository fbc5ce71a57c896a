"""A run's hostile inputs (issue 16): each one line ``path:line: ...``, exit 2, nothing read
unbounded; and what one rank alone can and cannot say.

Runs here are made from the real single-rank fixture ``mlp_default`` (rank 0 of a 2-rank
gloo run): rank 1 is a copy whose clock reads ``SHIFT_US`` ahead and which reaches every
collective ``LATE_US`` later (its gloo spans start later, end at the same time). The tests
assert those made-up numbers, never numbers read back from tracecli.
"""

from __future__ import annotations

import copy
import gzip
import json
import os

import pytest
from conftest import DDP_GPU, FIXTURES, assert_error, run

from tracecli.run import MAX_DIR_ENTRIES, analyze_run

MLP = FIXTURES / "kineto" / "mlp_default.json.gz"
SHIFT_US = 1500.0
LATE_US = 700.0


def _doc():
    with gzip.open(MLP, "rt") as f:
        return json.load(f)


def rank_doc(rank: int, shift: float = 0.0, late: float = 0.0, **info) -> dict:
    d = copy.deepcopy(_doc())
    d["distributedInfo"].update(rank=rank, **info)
    for e in d["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] += shift
        if late and str(e.get("name", "")).startswith("gloo:"):
            e["ts"] += late
            e["dur"] -= late
    return d


def write(path, doc) -> str:
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return str(path)


@pytest.fixture()
def pair(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    write(d / "rank0.json.gz", rank_doc(0))
    write(d / "rank1.json.gz", rank_doc(1, SHIFT_US, LATE_US))
    return d


def test_a_made_up_pair_gives_back_its_offset_and_lateness(pair):
    report = analyze_run([str(pair)], processes=2)
    assert report.ranks == [0, 1]
    assert report.clock_offset_us[1] == pytest.approx(SHIFT_US, abs=0.01)
    assert report.last_counts == {0: 0, 1: len(report.collectives)}
    for t in report.collectives:
        assert t.wait_ms[0] == pytest.approx(LATE_US / 1000.0, abs=1e-6)
        assert t.wait_ms[1] == 0.0


def test_inspect_run_json_has_the_documented_keys(pair):
    result = run("inspect", pair, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ranks"] == [0, 1]
    assert set(doc["clock_offset_us"]) == {"0", "1"} and doc["clock_offset_us"]["0"] == 0.0
    for s in doc["steps"]:
        assert {"step", "straggler", "lost_ms", "ranks"} <= set(s)
        assert set(s["ranks"]["0"]) == {"step_ms", "compute_ms", "wait_ms", "transfer_ms",
                                        "busy_ms", "exposed_ms"}
    for c in doc["collectives"]:
        assert {"step", "index", "kind", "purpose", "elements", "dtype", "transfer_ms",
                "wait_ms", "last"} <= set(c)
        assert c["last"] == 1


def test_several_files_are_a_run_and_the_session_remembers_it(pair, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = [pair / "rank1.json.gz", pair / "rank0.json.gz"]
    assert run("inspect", *files).exit_code == 0
    again = run("inspect", "--json")
    assert again.exit_code == 0, again.output
    assert "remembered run" in again.stderr
    assert json.loads(again.stdout)["ranks"] == [0, 1]


def test_export_run_writes_one_process_per_rank(pair, tmp_path):
    out = tmp_path / "aligned.json"
    result = run("export", pair, "--to", "chrome", "-o", out)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"rank 0", "rank 1"}
    # aligned: each collective ends at the same time on both ranks (they did, true time)
    ends = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "transfer":
            ends.setdefault(e["pid"], []).append(e["ts"] + e["dur"])
    assert [round(a - b, 1) for a, b in zip(ends[0], ends[1])] == [0.0] * len(ends[0])


def test_two_files_claiming_one_rank(tmp_path):
    a = write(tmp_path / "a.json.gz", rank_doc(0))
    b = write(tmp_path / "b.json.gz", rank_doc(0))
    assert_error(run("inspect", a, b), b, "claims rank 0", "a.json.gz")


def test_a_corrupt_rank(pair):
    (pair / "rank1.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", '))
    assert_error(run("inspect", pair), str(pair / "rank1.json.gz"))


def test_a_rank_of_another_run(pair):
    write(pair / "rank1.json.gz", rank_doc(1, shift=3600e6))
    assert_error(run("inspect", pair), str(pair / "rank1.json.gz"), "another run")


def test_ranks_that_disagree_on_the_world_size(pair):
    write(pair / "rank1.json.gz", rank_doc(1, world_size=4))
    assert_error(run("inspect", pair), str(pair / "rank1.json.gz"), "world size 4")


def test_a_rank_missing_a_step(pair):
    d = rank_doc(1)
    d["traceEvents"] = [e for e in d["traceEvents"] if e.get("name") != "ProfilerStep#4"]
    write(pair / "rank1.json.gz", d)
    assert_error(run("inspect", pair), str(pair / "rank1.json.gz"), "ProfilerStep#4")


def test_rank_from_the_file_name_else_an_error(tmp_path):
    d = rank_doc(0)
    del d["distributedInfo"]
    write(tmp_path / "worker0.json.gz", d)
    write(tmp_path / "worker1.json.gz", d)
    assert analyze_run([str(tmp_path)], processes=1).ranks == [0, 1]
    nameless = write(tmp_path / "host_77.json.gz", d)
    assert_error(run("inspect", tmp_path), nameless, "which rank")


def test_an_empty_directory(tmp_path):
    assert_error(run("inspect", tmp_path), str(tmp_path), "no profiler traces")


def test_a_directory_of_ten_thousand_files(tmp_path):
    for k in range(10_000):
        (tmp_path / f"rank{k}.json").touch()
    assert 10_000 > MAX_DIR_ENTRIES
    assert_error(run("inspect", tmp_path), str(tmp_path), f"{MAX_DIR_ENTRIES:,} entries")


def test_a_symlink_loop(tmp_path):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    assert_error(run("inspect", loop), str(loop))
    d = tmp_path / "d"
    d.mkdir()
    write(d / "rank0.json.gz", rank_doc(0))
    os.symlink(d / "rank1.json.gz", d / "rank1.json.gz")
    assert_error(run("inspect", d), str(d / "rank1.json.gz"), "symbolic links")


def test_several_unnamed_groups_are_not_matched_silently(pair):
    """Two groups of both ranks in pg_config, one group's threads in the trace, the same
    collectives on both ranks: which group they ran on cannot be told (both fit)."""
    groups = [{"pg_name": name, "pg_desc": "", "backend_config": "cpu:gloo", "pg_size": 2,
               "ranks": [0, 1]} for name in ("0", "1")]
    for rank in (0, 1):
        write(pair / f"rank{rank}.json.gz", rank_doc(rank, pg_count=2, pg_config=groups))
    report = analyze_run([str(pair)], processes=1)
    assert not report.collectives
    assert {u.reason.split("'")[0] for u in report.matching.unmatched} == {"rank 0", "rank 1"}
    assert all("pg_config" in u.reason for u in report.matching.unmatched)
    for rank in (0, 1):  # pg_config lists only the groups a rank is in (torch 2.13): one group
        write(pair / f"rank{rank}.json.gz", rank_doc(rank, pg_count=2))
    assert analyze_run([str(pair)], processes=1).collectives


def test_the_a100_sample_alone_says_what_one_rank_cannot(tmp_path):
    result = run("inspect", DDP_GPU)
    assert result.exit_code == 0, result.output
    assert "one rank of 2" in result.output and "cannot tell wait from transfer" in result.output
    d = tmp_path / "one"
    d.mkdir()
    os.symlink(DDP_GPU, d / "rank0.json.gz")
    doc = json.loads(run("inspect", d, "--json").stdout)
    assert doc["ranks"] == [0]
    assert all(c["transfer_ms"] is None and c["last"] is None for c in doc["collectives"])
    assert all(s["straggler"] is None for s in doc["steps"])
    assert any("one rank of a world of 2" in n for n in doc["notes"])
