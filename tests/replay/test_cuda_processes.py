"""The launcher with NCCL ranks, without a GPU: real rank processes on a fake GPU and a fake
NCCL group over gloo (tests/fake_nccl_group.py, switched on in every process by
tests/fakecuda_site/sitecustomize.py). Issue 28 items 3, 6, 7 and 8, end to end.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, VGG
from tracecli.cli.progress import PHASE_LINE

pytest.importorskip("torch", reason="replay needs the replay extra (torch)")
pytestmark = [pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux processes"),
              pytest.mark.slow]  # real rank processes, and wall-clock bounds on teardown

SITE = Path(__file__).resolve().parents[1] / "fakecuda_site"
REPLAY = ["replay", VGG, "--network", "10gbe", "--iters", "3", "--warmup", "1"]
WATCHED = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "CUDA_DEVICE_MAX_CONNECTIONS")


def env_with(fake: dict, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in WATCHED and not k.startswith("TORCH_")}
    env.update(PYTHONPATH=f"{SITE}{os.pathsep}{ROOT}", TRACECLI_FAKE_CUDA=json.dumps(fake),
               OMP_NUM_THREADS="1", **extra)
    return env


def tracecli(*args, env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracecli", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def last_line(out: subprocess.CompletedProcess) -> str:
    lines = out.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def test_a_hung_rank_is_named_and_torn_down_within_the_timeout(tmp_path):
    """Item 3: rank 1 hangs; rank 0 waits in its collective until NCCL's watchdog aborts it
    (the group's timeout, then 4 x the dump wait: 1 s here, 60 s by default). The launcher
    blamed healthy rank 0 ("killed by SIGABRT"), after the timeout and the dump wait."""
    env = env_with({"devices": 2}, TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC="250")
    started = time.monotonic()
    out = tracecli(*REPLAY, "--backend", "nccl", "--gpus", "2", "--timeout", "3",
                   "--inject-fault", "1:hang", env=env)
    elapsed = time.monotonic() - started
    line = last_line(out)
    assert out.returncode == 2, out.stderr
    assert line.startswith("tracecli: rank 1 did not respond"), line
    assert "hung" in line and "SIGABRT" not in line and "all 2 ranks stopped" in line
    assert elapsed < 3 + 3 + 25, elapsed  # timeout + grace + two ranks' start-up on 2 cores


def test_spawned_nccl_ranks_get_an_environment_that_keeps_overlap(tmp_path):
    """Item 7: TORCH_NCCL_BLOCKING_WAIT (either spelling) makes wait() block the host;
    CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream on one hardware queue. Spawned ranks run
    without them, and the command says so. Item 2, end to end: the group's timeout covers
    the step."""
    log = tmp_path / "nccl.jsonl"
    env = env_with({"devices": 2, "log": str(log)}, TORCH_NCCL_BLOCKING_WAIT="1",
                   NCCL_BLOCKING_WAIT="1", CUDA_DEVICE_MAX_CONNECTIONS="1")
    out = tracecli(*REPLAY, "--backend", "nccl", "--gpus", "2", "--backward-ms", "40",
                   "--timeout", "20", "--json", env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["replay"]["backend"] == "nccl" and doc["replay"]["verified"] is True
    inits = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(i["rank"] for i in inits) == [0, 1]
    assert sorted(i["device"] for i in inits) == [0, 1]
    for init in inits:
        assert init["env"] == {k: None for k in WATCHED}, init
        assert init["timeout_s"] >= 20 + doc["compute"]["backward_ms"] / 1000.0
    for name in ("TORCH_NCCL_BLOCKING_WAIT", "CUDA_DEVICE_MAX_CONNECTIONS"):
        assert name in out.stderr


def test_a_plan_that_does_not_fit_in_gpu_memory_is_one_line(tmp_path):
    """Item 6: VGG-19's 548 MiB of gradients on GPUs with 256 MiB free: one line, exit 2."""
    env = env_with({"devices": 2, "free": 256 << 20, "total": 16 << 30})
    out = tracecli(*REPLAY, "--backend", "nccl", "--gpus", "2", "--timeout", "10", env=env)
    assert out.returncode == 2, out.stderr
    # the phase lines of a start that ran over 5 s (a loaded machine) are progress, not error
    lines = [x for x in out.stderr.strip().splitlines() if not PHASE_LINE.match(x)]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "GPU memory" in lines[0] and "256.0 MiB free" in lines[0], lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_nodes_with_different_gpu_counts_agree_on_the_backend():
    """Item 8: two nodes of one rank each, one with a GPU and one without, under
    ``--backend auto``. Each chose for itself (NCCL on one, gloo on the other) and the world
    hung at init until the timeout; they must agree (gloo, as the weaker node can)."""
    port = free_port()
    base = dict(WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    procs = []
    for rank, devices in ((0, 1), (1, 0)):
        env = env_with({"devices": devices}, RANK=str(rank), **base)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tracecli", *map(str, REPLAY), "--backend", "auto",
             "--timeout", "15", "--json"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    doc = json.loads(outs[0][0])  # only rank 0 prints
    assert doc["replay"]["backend"] == "gloo" and doc["replay"]["ranks"] == 2
    assert "rank 1" in outs[0][1] and "gloo" in outs[0][1]  # the notice says why
