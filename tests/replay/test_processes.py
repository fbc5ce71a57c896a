"""Ranks never outlive the launcher, listen on loopback only, and never start when the
plan cannot run. Real processes: the tracecli command in a subprocess, marked by an
environment variable its ranks inherit, looked up in /proc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import VGG, assert_error, run

pytest.importorskip("torch", reason="replay needs the replay extra (torch)")
pytestmark = [pytest.mark.slow,  # real ranks started and killed, with wall-clock bounds
              pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")]


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``mark``."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"TRACECLI_TEST_MARK={mark}".encode() in environ.read_bytes():
                stat = (environ.parent / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":
                    found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def start(*args, mark: str) -> subprocess.Popen:
    env = {**os.environ, "TRACECLI_TEST_MARK": mark}
    return subprocess.Popen([sys.executable, "-m", "tracecli", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_gone(mark: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = marked(mark)
        if not left:
            return []
        time.sleep(0.1)
    return marked(mark)


REPLAY = ["replay", VGG, "--gpus", "2", "--network", "10gbe", "--iters", "200", "--warmup", "1"]


@pytest.mark.parametrize("after", [0.3, 1.0, 2.5])
def test_no_orphans_when_the_launcher_is_killed_early(after):
    mark = uuid.uuid4().hex
    launcher = start(*REPLAY, mark=mark)
    time.sleep(after)  # ranks are starting: importing torch, joining the group
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    assert wait_gone(mark, 15) == []


def test_ctrl_c_stops_every_rank_and_exits_130():
    mark = uuid.uuid4().hex
    launcher = start(*REPLAY, mark=mark)
    deadline = time.monotonic() + 30
    while len(marked(mark)) < 3 and time.monotonic() < deadline:  # launcher + 2 ranks
        time.sleep(0.1)
    time.sleep(1.0)
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "tracecli: interrupted"
    assert wait_gone(mark, 10) == []


def listening(pids: list[int]) -> set[tuple[str, str]]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                found.add((table, fields[1].split(":")[0]))
    return found


def test_local_rendezvous_listens_on_loopback_only():
    mark = uuid.uuid4().hex
    launcher = start(*REPLAY[:-4], "--iters", "3", "--warmup", "0", "--inject-fault", "1:hang",
                     "--timeout", "6", mark=mark)
    seen: set[tuple[str, str]] = set()
    deadline = time.monotonic() + 40
    while launcher.poll() is None and time.monotonic() < deadline:
        seen |= listening(marked(mark))
        time.sleep(0.2)
    launcher.communicate(timeout=60)
    assert seen, "no listening socket was seen"
    loopback = {("tcp", "0100007F"), ("tcp6", "00000000000000000000000001000000"),
                ("tcp6", "0000000000000000FFFF00000100007F")}
    assert seen <= loopback, seen


def test_too_many_cpu_ranks_are_refused_before_starting():
    from tracecli.replay.processes import cpu_rank_bound

    bound, _ = cpu_rank_bound()
    started = time.monotonic()
    assert_error(run("replay", VGG, "--gpus", str(bound + 1), "--network", "10gbe"), "tracecli: ",
                 "more than this machine holds", "--oversubscribe")
    assert_error(run("calibrate", "--gpus", str(bound + 1)), "tracecli: ", "--oversubscribe")
    assert time.monotonic() - started < 10


def test_plan_files_that_cannot_run_are_refused_first(tmp_path):
    plan = tmp_path / "plan.json"
    assert run("plan-buckets", VGG, "--out", plan).exit_code == 0
    doc = json.loads(plan.read_text())
    slow = dict(doc, compute={**doc["compute"], "backward_ms": 1e8})
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    assert_error(run("replay", "--plan", tmp_path / "slow.json", "--gpus", "2"),
                 str(tmp_path / "slow.json"), "backward_ms")
    huge = dict(doc)
    huge["gradients"] = [dict(g, bytes=10**15) if i == 0 else g for i, g in enumerate(doc["gradients"])]
    (tmp_path / "huge.json").write_text(json.dumps(huge))
    started = time.monotonic()
    assert_error(run("replay", "--plan", tmp_path / "huge.json", "--gpus", "2", "--network", "10gbe"),
                 str(tmp_path / "huge.json"), "available")
    assert time.monotonic() - started < 10
    week = dict(doc, compute={**doc["compute"], "backward_ms": 5e6})
    (tmp_path / "week.json").write_text(json.dumps(week))
    assert_error(run("replay", "--plan", tmp_path / "week.json", "--gpus", "2", "--network", "10gbe"),
                 str(tmp_path / "week.json"), "at most 600 s")
