"""replay and calibrate on real ranks: gloo on CPU here, NCCL where CUDA is present."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracecli.errors import ReplayError

from conftest import RESNET, VGG, assert_error, run

pytestmark = pytest.mark.slow  # real gloo ranks, and wall-clock bounds on teardown

torch = pytest.importorskip("torch", reason="replay needs the replay extra (torch)")

REPORT_KEYS = {"strategy", "max_bytes", "gpus", "cost_model", "buckets", "predicted",
               "measured", "error_pct", "replay"}


def replay_json(*args):
    result = run("replay", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check_report(doc, ranks=2):
    assert REPORT_KEYS <= set(doc)
    assert doc["replay"]["verified"] is True
    assert doc["replay"]["ranks"] == ranks and doc["replay"]["backend"] in ("gloo", "nccl")
    m = doc["measured"]
    assert {"iteration_ms", "iteration_p90_ms", "buckets", "exposed_comm_ms"} <= set(m)
    assert len(m["buckets"]) == len(doc["buckets"])
    assert m["iteration_ms"] > 0 and isinstance(doc["error_pct"], float)
    for b in doc["buckets"]:
        assert {"index", "tensors", "bytes", "ready_ms", "start_ms", "end_ms"} <= set(b)
        mb = b["measured"]
        assert mb["ready_ms"] <= mb["start_ms"] + 1e-6 <= mb["end_ms"] + 2e-6


def test_replay_resnet_gloo_in_place_calibration():
    doc = replay_json(RESNET, "--backward-ms", "60", "--gpus", "2", "--iters", "3", "--warmup",
                      "1", "--strategy", "ddp", "--backend", "gloo")
    check_report(doc)
    assert doc["replay"]["cost_source"] == "in-place calibration"
    assert doc["replay"]["calibration"]["bandwidth_gbps"] > 0
    assert sum(len(b["tensors"]) for b in doc["buckets"]) == 214


def test_replay_vgg_gloo_with_network_and_chrome_trace(tmp_path):
    chrome = tmp_path / "t.json"
    doc = replay_json(VGG, "--gpus", "2", "--iters", "2", "--warmup", "1", "--strategy", "size",
                      "--max-bytes", "64MiB", "--network", "10gbe", "--device", "v100",
                      "--chrome-trace", chrome)
    check_report(doc)
    assert doc["cost_model"]["name"] == "10gbe" and doc["replay"]["calibration"] is None
    assert sum(b["bytes"] for b in doc["buckets"]) == 574_668_960
    trace = json.loads(chrome.read_text())
    assert {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"} == {1, 2}


def test_replay_plan_file_and_table(tmp_path):
    plan = tmp_path / "plan.json"
    assert run("plan-buckets", RESNET, "--backward-ms", "40", "--strategy", "optimal", "--gpus", "2",
               "--network", "10gbe", "--out", plan).exit_code == 0
    result = run("replay", "--plan", plan, "--gpus", "2", "--iters", "2", "--warmup", "0",
                 "--network", "10gbe")
    assert result.exit_code == 0, result.output
    assert "buffers verified" in result.stdout and "measured median" in result.stdout
    saved = json.loads(plan.read_text())
    doc = replay_json("--plan", plan, "--gpus", "2", "--iters", "1", "--warmup", "0",
                      "--network", "10gbe")
    assert [b["tensors"] for b in doc["buckets"]] == [b["tensors"] for b in saved["buckets"]]
    assert doc["predicted"]["iteration_ms"] == pytest.approx(saved["predicted"]["iteration_ms"])


def test_replay_runs_a_reduce_scatter_bucket_for_real(tmp_path):
    """A plan file whose first bucket is a reduce-scatter (as sharded data parallelism plans
    them): gloo runs reduce_scatter_tensor and every rank's shard of the sum is checked."""
    plan = tmp_path / "plan.json"
    assert run("plan-buckets", VGG, "--max-bytes", "64MiB", "--gpus", "2", "--network", "10gbe",
               "--out", plan).exit_code == 0
    doc = json.loads(plan.read_text())
    doc["buckets"][0]["collective"] = "reduce_scatter"
    plan.write_text(json.dumps(doc))
    report = replay_json("--plan", plan, "--gpus", "2", "--iters", "1", "--warmup", "0",
                         "--network", "10gbe")
    check_report(report)
    assert report["buckets"][0]["collective"] == "reduce_scatter"
    assert report["replay"]["buffers"][0]["collective"] == "reduce_scatter"


def test_calibrate_profile_feeds_plan_buckets(tmp_path):
    profile = tmp_path / "cal.json"
    result = run("calibrate", "--gpus", "2", "--max-size", "4MiB", "--points", "5", "--iters", "3",
                 "--warmup", "1", "--out", profile)
    assert result.exit_code == 0, result.output
    assert "fit: alpha" in result.stdout
    doc = json.loads(profile.read_text())
    assert doc["format"] == "tracecli-calibration" and len(doc["points"]) == 5
    assert doc["alpha_us"] >= 0 and doc["bandwidth_gbps"] > 0 and "r2" in doc["fit"]
    planned = run("plan-buckets", VGG, "--calibration", profile, "--gpus", "2", "--json")
    assert planned.exit_code == 0
    cost = json.loads(planned.stdout)["cost_model"]
    assert cost["alpha_us"] == pytest.approx(doc["alpha_us"]) and "calibrated gloo" in cost["source"]


def children_of(pid: int) -> list[int]:
    """Live child processes, less multiprocessing's resource tracker (it lives as long
    as its parent and is no rank)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"resource_tracker" not in cmdline:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for orphans")
@pytest.mark.parametrize("mode,words", [
    ("raise", ["rank 1 failed", "planted failure"]),
    ("exit", ["rank 1 exited with status 3"]),
    ("hang", ["rank 1 did not respond", "hung", "rank 0 waited for it"]),
])
def test_failing_rank_is_torn_down(mode, words):
    from tracecli.pipeline import ComputeRequest, inputs
    from tracecli.costs import resolve_cost_model
    from tracecli.planning import options_of
    from tracecli.replay import Fault, Ranks, ReplayJob
    from tracecli.replay.processes import start
    from tracecli import load_trace

    _, _, inp = inputs(load_trace(RESNET), ComputeRequest(backward_ms=20))
    job = ReplayJob(inp, "ddp", options_of("ddp"), resolve_cost_model(2, "10gbe"), "10gbe", 3, 1)
    started = time.monotonic()
    stages = []
    with pytest.raises(ReplayError) as err:
        start(job, Ranks(2, "gloo", timeout_s=4, fault=Fault(1, mode)),
               lambda *update: stages.append(update))
    # progress from the first instant (issue 17 item 14): the ranks' start-up, then their work
    assert stages[0] == ("starting 2 ranks", 0, 2)
    if len(stages) > 1:
        assert stages[1] == ("starting 2 ranks", 2, 2) and stages[2][0] == "replay"
    elapsed = time.monotonic() - started
    message = str(err.value)
    assert "\n" not in message and "all 2 ranks stopped" in message
    for word in words:
        assert word in message, message
    assert elapsed < 4 + 3 + 15, elapsed  # timeout + grace + process start-up
    assert children_of(os.getpid()) == []


def test_failing_rank_through_the_cli():
    started = time.monotonic()
    result = run("replay", RESNET, "--backward-ms", "20", "--gpus", "2", "--iters", "2",
                 "--network", "10gbe", "--timeout", "3", "--backend", "gloo",
                 "--inject-fault", "0:raise")
    assert_error(result, "tracecli: ", "rank 0 failed", "planted failure")
    assert time.monotonic() - started < 30


def test_nccl_without_gpus_is_refused_before_starting():
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("this machine has the GPUs")
    # a CPU build says it has no NCCL; a CUDA build without enough GPUs counts them
    assert_error(run("replay", VGG, "--backend", "nccl", "--gpus", "2"), "tracecli: ",
                 "--backend gloo")


def test_without_torch_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert_error(run("replay", VGG, "--gpus", "2"), "tracecli: ", "pip install 'tracecli[replay]'")
    assert_error(run("calibrate"), "tracecli: ", "pip install 'tracecli[replay]'")


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None,
                    reason="torchrun not installed")
def test_replay_under_torchrun(tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    cmd = [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "tracecli", "replay", str(RESNET),
           "--backward-ms", "30", "--iters", "2", "--warmup", "1", "--network", "10gbe",
           "--strategy", "size", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)  # only rank 0 prints
    check_report(doc)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA-only path: needs a GPU")
def test_nccl_replay_on_gpu():
    n = min(torch.cuda.device_count(), 2)
    if n < 2:
        pytest.skip("NCCL replay needs 2 GPUs on one node")
    doc = replay_json(VGG, "--gpus", str(n), "--backend", "nccl", "--iters", "3", "--warmup", "1")
    check_report(doc, ranks=n)
    assert doc["replay"]["backend"] == "nccl"
