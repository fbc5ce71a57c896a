"""tracecli against issue 25's runs and their own truth (``tests/fixtures/multirank``,
``generate25.py``, ``derive_gpu.py``; see its README).

Every expected value is read from ``truth.json``: what each rank issued (kind, group, size,
peer, splits), which threads each process group started, the injected delays and the op
that held them, the offsets added to the clocks, and, for the A100 trace derived with its
device 37 ms behind the host, the device's own times computed from the original sample.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import FIXTURES, run

from tracecli.run import analyze_run, read_run
from tracecli.run.groups import lane_groups

RUNS = FIXTURES / "multirank"
KIND = {"all_reduce": "allreduce", "all_to_all": "alltoall", "all_gather": "allgather",
        "send": "send", "recv": "recv"}
MATCHED = ["gloo2_alltoallv", "gloo4_alltoallv", "gloo2_pipeline", "gloo4_pipeline_dp",
           "gloo2_threegroups", "gloo4_threegroups"]


def truth(case: str) -> dict:
    return json.loads((RUNS / case / "truth.json").read_text())


@pytest.fixture(scope="module")
def reports():
    cases = MATCHED + ["gloo4_backward_straggler", "gloo2_sleep25", "gloo4_missing_rank"]
    return {case: analyze_run([str(RUNS / case)], processes=2) for case in cases}


def _mine(report, rank: int) -> list:
    """What ``rank`` took part in, as (step, kind, elements, group, peer), in its order."""
    got = []
    for t in report.collectives:
        c = t.matched.by_rank.get(rank)
        if c is not None:
            group = None if c.kind.point_to_point else t.matched.group
            got.append((t.matched.step, c.launch_ms, (t.matched.step, c.kind.value, c.elements,
                                                      group, c.peer)))
    return [g[2] for g in sorted(got, key=lambda g: (g[0], g[1]))]


@pytest.mark.parametrize("case", MATCHED)
def test_every_collective_is_matched_on_its_group(reports, case):
    """Uneven all-to-all-v, sends with their recvs, three process groups: every collective
    each rank issued is matched, on its own group (sends and recvs with their peer), in the
    rank's order; nothing is left unmatched."""
    t, r = truth(case), reports[case]
    assert not r.matching.unmatched, r.matching.unmatched
    for rank, issued in t["collectives"].items():
        expected = [(c["step"], KIND[c["kind"]], c["elements"],
                     None if c["kind"] in ("send", "recv") else c["group"], c.get("peer"))
                    for c in issued]
        assert _mine(r, int(rank)) == expected


@pytest.mark.parametrize("case", ["gloo2_alltoallv", "gloo4_alltoallv"])
def test_an_uneven_all_to_all_matches_with_each_rank_s_own_counts(reports, case):
    """Each rank's counts and splits are its own (the truth's, as passed to
    all_to_all_single); the transfer is the shortest rank's time and that rank is last."""
    t, r = truth(case), reports[case]
    a2a = [c for c in r.collectives if c.matched.first.kind.value == "alltoall"]
    assert len(a2a) == 2 * len(t["steps_present"])
    for c in a2a:
        step = c.matched.step
        k = [x for x in a2a if x.matched.step == step].index(c)
        for rank, x in c.matched.by_rank.items():
            own = [i for i in t["collectives"][str(rank)] if i["step"] == step and i["kind"] == "all_to_all"][k]
            assert x.elements == own["elements"] and x.out_elements == own["out_elements"]
            assert x.splits == (tuple(own["input_split_sizes"]), tuple(own["output_split_sizes"]))
        assert c.transfer_ms == min(c.duration_ms.values()) and c.last in c.matched.by_rank
    assert len({x.elements for c in a2a for x in c.matched.by_rank.values()}) > 2  # uneven


@pytest.mark.parametrize("case", ["gloo4_threegroups", "gloo2_threegroups", "gloo4_pipeline_dp"])
def test_the_groups_are_the_threads_the_groups_started(case):
    """gloo records no group: tracecli puts each runloop thread in a group, and that is the
    group that started the thread (read from /proc by the run itself)."""
    t = truth(case)
    lanes, unresolved = lane_groups(read_run([str(RUNS / case)], 2).ranks)
    assert not unresolved
    for rank, mapping in lanes.items():
        started = {tid: group for group, threads in t["group_threads"][str(rank)].items()
                   for tid in threads}
        assert mapping and {lane: started[lane] for lane in mapping} == mapping


@pytest.mark.parametrize("case", ["gloo4_alltoallv", "gloo4_pipeline_dp", "gloo4_threegroups",
                                  "gloo2_pipeline"])
def test_clock_offsets_from_every_synchronising_collective(reports, case):
    """All-to-alls, sends with their recvs and groups that do not hold the lowest rank all
    give offsets; within 2 ms of the offsets added (ends of one collective on these loaded
    2-core hosts are that far apart at worst, README), each with a finite spread."""
    t, r = truth(case), reports[case]
    synchronising = [c for c in r.collectives if c.synchronising]
    assert r.offsets_from == len(synchronising) == len(r.collectives)
    for rank, offset in t["clock_offset_us"].items():
        assert r.clock_offset_us[int(rank)] == pytest.approx(offset, abs=2000.0)
        assert r.clock_spread_us[int(rank)] is not None and math.isfinite(r.clock_spread_us[int(rank)])


def test_a_compute_straggler_inside_backward_and_its_slow_op(reports):
    """Step times are equalised by DDP's all-reduces; the straggler is named all the same,
    and the op that made it late is the injected one, first, with about its time."""
    t, r = truth("gloo4_backward_straggler"), reports["gloo4_backward_straggler"]
    steps = {s.step: s for s in r.steps}
    for inj in t["injected"]:
        s = steps[inj["step"]]
        assert s.straggler == inj["rank"] and not s.straggler_missing
        top = s.why[0]
        assert top.op == f"{inj['op']} #{inj['op_occurrence_in_step_backward']}"
        assert top.kind == "backward"
        assert top.added_ms == pytest.approx(inj["measured_ms"], rel=0.05)
    doc = json.loads(run("inspect", RUNS / "gloo4_backward_straggler", "--json").stdout)
    for inj in t["injected"]:
        step = next(s for s in doc["steps"] if s["step"] == inj["step"])
        assert step["why"][0]["op"].startswith(inj["op"])
    text = run("inspect", RUNS / "gloo4_backward_straggler").stdout
    assert "BackwardDelayBackward #1 (backward;" in " ".join(text.split())


def test_a_25_ms_sleep_on_two_ranks_is_found_said_and_explained(reports):
    t, r = truth("gloo2_sleep25"), reports["gloo2_sleep25"]
    inj = t["injected"][0]
    found = {s.step: s for s in r.steps if s.straggler is not None}
    assert list(found) == [inj["step"]] and found[inj["step"]].straggler == inj["rank"]
    top = found[inj["step"]].why[0]
    assert top.kind == "untraced" and top.added_ms == pytest.approx(inj["measured_ms"], abs=2.0)
    doc = json.loads(run("inspect", RUNS / "gloo2_sleep25", "--json").stdout)
    assert doc["noise"]["k"] > 0 and all(s["noise_ms"] > 0 for s in doc["steps"])
    flagged = {(c["step"], c["last"]) for c in doc["collectives"] if c["flagged"]}
    assert flagged == {(inj["step"], inj["rank"])}
    assert all(c["lateness_ms"] <= c["threshold_ms"] for c in doc["collectives"] if not c["flagged"])


def test_a_missing_rank_is_named_and_plans_refuse(reports, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t, r = truth("gloo4_missing_rank"), reports["gloo4_missing_rank"]
    missing = t["missing_ranks"]
    assert list(r.missing_ranks) == missing
    late = [s for s in r.steps if s.straggler is not None]
    assert [(s.step, s.straggler, s.straggler_missing) for s in late] == \
        [(i["step"], i["rank"], True) for i in t["injected"]]
    assert all(c.matched.missing == tuple(missing) and not c.complete for c in r.collectives)
    text = run("inspect", RUNS / "gloo4_missing_rank").stdout
    assert f"rank {missing[0]} (it has no trace here)" in " ".join(text.split())
    for extra in ([], ["--compare"]):
        result = run("plan-buckets", RUNS / "gloo4_missing_rank", *extra)
        assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
        assert f"no trace of rank {missing[0]}" in result.stderr
        assert "plan-buckets" in result.stderr and "rank0.json.gz" in result.stderr


@pytest.mark.parametrize("case", MATCHED + ["gloo4_missing_rank", "gloo2_sleep25", "a100_host_ahead"])
def test_no_nan_is_printed(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for extra in ([], ["--json"]):
        result = run("inspect", RUNS / case, *extra)
        assert result.exit_code == 0, result.output
        assert "nan" not in result.stdout.lower().replace("nanosecond", "")
    json.loads(run("inspect", RUNS / case, "--json").stdout)  # strict JSON: no NaN either


# the A100 trace with its device 37 ms behind its host --------------------------------------

def test_a_gpu_step_is_the_device_s_step():
    """The derived trace (a run of one rank): each step's time, busy compute and exposed
    communication are the device's, as computed from the original sample by the truth."""
    t = truth("a100_host_ahead")["original"]["steps"]
    doc = json.loads(run("inspect", RUNS / "a100_host_ahead", "--json").stdout)
    assert doc["clock"] == {"0": "device"}
    for s in doc["steps"]:
        mine, want = s["ranks"]["0"], t[str(s["step"])]
        assert mine["step_ms"] == pytest.approx(want["device_span_us"] / 1000.0, abs=0.002)
        assert mine["busy_ms"] == pytest.approx(want["compute_busy_us"] / 1000.0, abs=0.002)
        assert mine["exposed_ms"] == pytest.approx(want["nccl_exposed_us"] / 1000.0, abs=0.002)
        assert mine["transfer_ms"] == pytest.approx(want["nccl_busy_us"] / 1000.0, abs=0.002)


@pytest.mark.parametrize("step", [4, 5, 6])
def test_the_as_run_plan_reproduces_the_device_s_step(step):
    """The host runs 37 ms ahead: the as-run plan is the device's step all the same (its
    iteration within 15% of the device's step period; here, the step's device span), the
    same as on the original sample, and the all-reduces start when their gradients are
    ready on the device (not 37 ms after, as host times said)."""
    t = truth("a100_host_ahead")
    derived = RUNS / "a100_host_ahead" / "rank0.json.gz"
    original = FIXTURES.parent.parent / t["derived_from"]
    docs = [json.loads(run("plan-buckets", p, "--strategy", "observed", "--step", step,
                           "--json").stdout) for p in (derived, original)]
    assert docs[0]["predicted"] == docs[1]["predicted"] and docs[0]["buckets"] == docs[1]["buckets"]
    iteration = docs[0]["predicted"]["iteration_ms"]
    device = t["original"]
    assert iteration == pytest.approx(device["steps"][str(step)]["device_span_us"] / 1000.0, abs=0.01)
    for period in device["device_step_period_us"]:
        assert abs(iteration - period / 1000.0) <= 0.15 * period / 1000.0
    for b in docs[0]["buckets"]:
        assert 0.0 <= b["start_ms"] - b["ready_ms"] < 1.0


# bad input ------------------------------------------------------------------------------------

def _one_line_exit_2(result, *words):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    for w in words:
        assert w in lines[0]


def test_ranks_of_two_runs(tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "rank0.json.gz").write_bytes((RUNS / "gloo2_clean" / "rank0.json.gz").read_bytes())
    (d / "rank1.json.gz").write_bytes((RUNS / "gloo2_clean_twin" / "rank1.json.gz").read_bytes())
    _one_line_exit_2(run("inspect", d), str(d / "rank1.json.gz"), "another run")


def test_one_rank_truncated(tmp_path):
    import gzip

    d = tmp_path / "cut"
    d.mkdir()
    (d / "rank0.json.gz").write_bytes((RUNS / "gloo2_clean" / "rank0.json.gz").read_bytes())
    text = gzip.decompress((RUNS / "gloo2_clean" / "rank1.json.gz").read_bytes())
    (d / "rank1.json").write_bytes(text[: len(text) // 2])
    _one_line_exit_2(run("inspect", d), str(d / "rank1.json"))
    (d / "rank1.json").unlink()
    (d / "rank1.json.gz").write_bytes((RUNS / "gloo2_clean" / "rank1.json.gz").read_bytes()[:20000])
    _one_line_exit_2(run("inspect", d), str(d / "rank1.json.gz"))


def test_4096_empty_files(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    for k in range(4096):
        (d / f"rank{k}.json").touch()
    _one_line_exit_2(run("inspect", d), str(d), "no profiler traces", "4096")
    _one_line_exit_2(run("plan-buckets", d), str(d), "no profiler traces")
