"""The three commands as users type them, in a fresh directory, and the session's rules."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import FIXTURES, RESNET, RESNET_SIZES, VGG, assert_error, run


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(VGG, tmp_path / "trace.txt")
    return tmp_path


@pytest.mark.slow  # a real 4-rank replay
def test_the_three_lines(here):
    torch = pytest.importorskip("torch")  # noqa: F841 - replay needs it
    first = run("inspect", "trace.txt")
    assert first.exit_code == 0 and "/predictor/fc8" in first.stdout
    state = json.loads((here / ".tracecli" / "state.json").read_text())
    assert state["trace"]["given"] == "trace.txt" and len(state["trace"]["sha256"]) == 64

    second = run("plan-buckets", "--max-bytes", "32k")
    assert second.exit_code == 0, second.output
    assert "planning the remembered trace trace.txt" in second.stderr
    assert "Plan size" in second.stdout
    plan = json.loads((here / ".tracecli" / "plan.json").read_text())
    assert plan["strategy"] == "size" and plan["max_bytes"] == 32 * 1024

    third = run("replay", "--gpus", "4", "--iters", "2", "--warmup", "1", "--network", "10gbe")
    assert third.exit_code == 0, third.output
    assert "replaying the plan remembered by tracecli plan-buckets" in third.stderr
    assert "buffers verified" in third.stdout
    assert [b for b in plan["buckets"]] and "4 ranks" in third.stdout


def test_no_state_says_what_to_do(here):
    assert_error(run("plan-buckets", "--max-bytes", "32k"), "tracecli: ",
                 "no trace yet: run tracecli inspect TRACE, or pass TRACE")
    assert_error(run("replay", "--gpus", "2"), "tracecli: ", "no trace yet")


def test_explicit_arguments_win(here):
    assert run("inspect", "trace.txt").exit_code == 0
    doc = json.loads(run("plan-buckets", RESNET, "--backward-ms", "50", "--json").stdout)
    assert len(doc["gradients"]) == 214  # the TRACE given, not the remembered one


def test_changed_trace_is_read_again_and_its_plan_forgotten(here):
    assert run("inspect", "trace.txt").exit_code == 0
    assert run("plan-buckets", "--max-bytes", "32k").exit_code == 0
    (here / "trace.txt").write_text((FIXTURES / "mlp_chainer.txt").read_text())
    result = run("plan-buckets", "--json")
    assert result.exit_code == 0
    assert "changed since it was remembered" in result.stderr and "forgotten" in result.stderr
    assert len(json.loads(result.stdout)["gradients"]) == 3  # the new content, never stale


def test_vanished_trace_is_one_line(here):
    assert run("inspect", "trace.txt").exit_code == 0
    os.unlink(here / "trace.txt")
    assert_error(run("plan-buckets"), "trace.txt: ", "gone", "tracecli inspect TRACE")


def test_remembered_options_travel(here):
    shutil.copy(RESNET, here / "r.txt")
    assert run("inspect", "r.txt", "--sizes", str(RESNET_SIZES)).exit_code == 0
    doc = json.loads(run("plan-buckets", "--backward-ms", "40", "--json").stdout)
    assert len(doc["gradients"]) == 214 and doc["gradients"][0]["bytes"] == 4000


def test_status_and_reset(here):
    assert "no trace remembered" in run("status").stdout
    run("inspect", "trace.txt")
    run("plan-buckets", "--strategy", "ddp")
    text = run("status").stdout
    assert "trace: trace.txt (unchanged)" in text and "plan: ddp" in text and "reset: delete" in text
    doc = json.loads(run("status", "--json").stdout)
    assert doc["format"] == "tracecli-session" and doc["plan"]["strategy"] == "ddp"
    shutil.rmtree(here / ".tracecli")
    assert "no trace remembered" in run("status").stdout


def test_corrupt_state_is_ignored_with_a_notice(here):
    (here / ".tracecli").mkdir()
    (here / ".tracecli" / "state.json").write_text("{not json")
    result = run("status")
    assert result.exit_code == 0 and "unreadable" in result.stderr


@pytest.mark.parametrize("field,value", [("path", 3), ("size", "big"), ("step", True),
                                         ("sha256", None), ("extra", 1)])
def test_state_with_wrong_types_is_ignored_with_a_notice(here, field, value):
    run("inspect", "trace.txt")
    run("plan-buckets")
    state = here / ".tracecli" / "state.json"
    doc = json.loads(state.read_text())
    doc["trace"][field] = value
    state.write_text(json.dumps(doc))
    for command in (["status"], ["plan-buckets"]):
        result = run(*command)
        assert "unreadable" in result.stderr and "Traceback" not in result.output
    assert run("plan-buckets").exit_code == 2  # nothing remembered: one line, what to do
    doc = json.loads(state.read_text())
    doc["plan"] = {"strategy": "size", "options": {}, "file": ["x"], "trace_sha256": None}
    state.write_text(json.dumps(doc))
    assert "unreadable" in run("status").stderr


def test_stdin_is_read_but_not_remembered(here):
    result = run("inspect", "-", "--json", input=(FIXTURES / "mlp_chainer.txt").read_text())
    assert result.exit_code == 0 and json.loads(result.stdout)["parameters"]["count"] == 3
    assert not (here / ".tracecli" / "state.json").exists()


def test_strategy_options_replan_the_remembered_trace(here):
    pytest.importorskip("torch")
    run("inspect", "trace.txt")
    run("plan-buckets", "--max-bytes", "32k")
    result = run("replay", "--strategy", "single", "--gpus", "2", "--iters", "1", "--warmup", "0",
                 "--network", "10gbe", "--json")
    assert result.exit_code == 0, result.output
    assert "replaying the remembered trace" in result.stderr
    assert json.loads(result.stdout)["strategy"] == "single"


def test_only_inspect_changes_the_remembered_trace(here):
    """A loop of plan-buckets over other files leaves the session as inspect set it: later
    commands without TRACE still read the inspected trace (issue 17 item 13)."""
    assert run("inspect", "trace.txt").exit_code == 0
    assert run("plan-buckets", "--max-bytes", "32k").exit_code == 0
    plan = (here / ".tracecli" / "plan.json").read_text()
    other = run("plan-buckets", RESNET, "--backward-ms", "50")
    assert other.exit_code == 0, other.output
    state = json.loads((here / ".tracecli" / "state.json").read_text())
    assert state["trace"]["given"] == "trace.txt"
    assert (here / ".tracecli" / "plan.json").read_text() == plan  # not replaced either
    exported = run("export", "--to", "json", "-o", "-")
    assert exported.exit_code == 0 and "exporting the remembered trace trace.txt" in exported.stderr
    assert json.loads(exported.stdout)["graph"]["format"] == "chainer"
    again = run("plan-buckets", "trace.txt", "--max-bytes", "64k")  # the remembered file, named
    assert again.exit_code == 0
    assert json.loads((here / ".tracecli" / "plan.json").read_text())["max_bytes"] == 64 << 10
