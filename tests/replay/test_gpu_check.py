"""benchmarks/gpu_check.py: on a machine without a GPU it is a dry run that lists every
check it would run, and exits 0; its one-rank check runs on a fake GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
CHECKS = ("one rank", "pytest nccl", "calibrate", "nccl-tests", "replay --baseline",
          "fault raise", "fault hang", "long step", "torchrun")

pytest.importorskip("torch", reason="gpu_check asks torch for the GPUs")


def run(*args, env=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args,gpus", [((), "2"), (("--dry-run", "--gpus", "1"), "1")])
def test_without_a_gpu_it_lists_what_it_would_run(args, gpus):
    out = run(*args, env={"CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "dry run, nothing started" in lines[0] and f"on {gpus} GPUs" in lines[0]
    rows = {line.split("  ")[0]: line for line in lines[2:]}
    assert set(rows) == set(CHECKS)
    assert "tracecli replay" in rows["fault hang"] and "--inject-fault 1:hang" in rows["fault hang"]
    assert "--nproc-per-node" in rows["torchrun"]
    if gpus == "1":  # one GPU: only the one-rank check runs
        assert all("skip: needs 2 GPUs" in rows[c] for c in CHECKS if c != "one rank")


@pytest.mark.slow  # a rank process
def test_the_one_rank_check_runs_cudastep_on_a_gpu():
    """The library path gpu_check takes on one GPU, here on the fake one."""
    site = ROOT / "tests" / "fakecuda_site"
    out = run("--one-rank", env={"PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
                                 "TRACECLI_FAKE_CUDA": json.dumps({"devices": 1})})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["replay"]["backend"] == "nccl" and doc["replay"]["ranks"] == 1
    assert doc["replay"]["verified"] is True and doc["replay"]["spin_clock_drift_pct"] is not None
