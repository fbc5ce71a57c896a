"""``tracecli diff``: two real runs that differ in ``bucket_cap_mb`` (25 and 0.5 MB, DDP's
own bucket record beside each in ``ddp_logging.json``), and "did the advice work" with a
plan file. The pair's step times are within their noise (the fixture's README: their order
flipped between two generations of the same pair), so the verdict must say so.
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, run

from tracecli.run.diff import change

RUNS = FIXTURES / "multirank"
A, B = RUNS / "gloo2_diff_cap25", RUNS / "gloo2_diff_cap05"


def ddp_buckets(case) -> list[int]:
    """DDP's own record of the buckets it ran (bytes), the same on every rank."""
    logs = json.loads((case / "ddp_logging.json").read_text())
    sizes = {logs[r]["rebuilt_bucket_sizes"] for r in logs}
    assert len(sizes) == 1
    return [int(s) for s in sizes.pop().split(",")]


@pytest.fixture(scope="module")
def doc():
    result = run("diff", A, B, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_each_run_s_buckets_are_ddp_s_own(doc):
    for side, case in (("before", A), ("after", B)):
        buckets = doc["buckets"][side]
        assert [4 * b["elements"] for b in buckets] == ddp_buckets(case)
        assert all(b["dtype"] == "float32" and b["ms"] > 0 for b in buckets)


def test_the_step_change_is_within_the_noise(doc):
    changes = {c["what"]: c for c in doc["changes"]}
    assert set(changes) == {"step", "compute", "exposed communication", "wait", "transfer"}
    step = changes["step"]
    assert step["verdict"] == "within noise"
    assert abs(step["delta_ms"]) <= step["noise_ms"]
    text = " ".join(run("diff", A, B).stdout.split())
    assert "did not change beyond the noise" in text and "no gain is shown" in text


def test_the_json_contract(doc):
    assert doc["format"] == "tracecli-diff" and doc["version"] == 1
    assert doc["before"]["ranks"] == [0, 1] and len(doc["before"]["steps"]) == 6
    for c in doc["collectives"]:
        assert set(c) == {"slot", "before", "after"}
    for o in doc["ops"]:
        assert o["delta_ms"] == pytest.approx(o["after_ms"] - o["before_ms"], abs=0.002)
    assert [abs(o["delta_ms"]) for o in doc["ops"]] == sorted((abs(o["delta_ms"]) for o in doc["ops"]), reverse=True)
    assert "advice" not in doc


def test_did_the_advice_work(tmp_path, monkeypatch):
    """RUN_B made with a plan (here: DDP at 0.5 MB planned from RUN_A, what RUN_B ran): the
    predicted gain beside the measured one; RUN_B's buckets are the plan's (checked against
    DDP's own record), and the verdict is the noise's."""
    monkeypatch.chdir(tmp_path)
    made = run("plan-buckets", A, "--strategy", "ddp", "--max-bytes", "0.5MiB", "--out", "plan.json")
    assert made.exit_code == 0, made.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    result = run("diff", A, B, "--plan", "plan.json", "--json")
    assert result.exit_code == 0, result.output
    advice = json.loads(result.stdout)["advice"]
    assert advice["applied"] is True and advice["buckets_run"] == ddp_buckets(B)
    assert advice["predicted_after_ms"] == pytest.approx(plan["predicted"]["iteration_ms"], abs=0.001)
    assert advice["predicted_gain_ms"] == pytest.approx(
        advice["predicted_before_ms"] - advice["predicted_after_ms"], abs=0.002)
    assert advice["verdict"].startswith("no measurable change")
    text = " ".join(run("diff", A, B, "--plan", "plan.json").stdout.split())
    assert "did the advice work? no measurable change" in text and "the run's buckets are the plan's" in text
    other = run("diff", A, A, "--plan", "plan.json", "--json")  # A did not run the plan
    assert json.loads(other.stdout)["advice"]["applied"] is False


def test_single_traces_diff_too():
    result = run("diff", A / "rank0.json.gz", B / "rank0.json.gz", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["before"]["ranks"] == [0] and len(doc["buckets"]["after"]) == 3


@pytest.mark.parametrize("before, after, verdict", [
    ([10.0, 10.2, 9.9, 10.1], [7.0, 7.1, 6.9, 7.2], "faster"),
    ([10.0, 10.2, 9.9, 10.1], [13.0, 13.1, 12.9, 13.2], "slower"),
    ([10.0, 14.0, 8.0, 12.0], [11.0, 9.0, 13.0, 10.0], "within noise"),
    ([10.0], [10.05], "within noise"),
])
def test_a_change_is_past_the_noise_or_not(before, after, verdict):
    c = change("step", before, after)
    assert c.verdict == verdict


def test_bad_runs_are_one_line(tmp_path):
    result = run("diff", tmp_path / "nope", B)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    bad = tmp_path / "plan.json"
    bad.write_text("{}")
    result = run("diff", A, B, "--plan", bad)
    assert result.exit_code == 2 and str(bad) in result.stderr
