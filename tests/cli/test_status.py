"""status_lines: what ``tracecli status`` prints for each state of a directory's session.

The session is made by the commands users type (inspect, plan-buckets), then read back with
``Session.load``; each case checks every line, and one checks the command prints the same.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tracecli.render.status import status_lines
from tracecli.cli.session import Session

from conftest import DDP_GPU, FIXTURES, RESNET, RESNET_SIZES, VGG, run


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(VGG, tmp_path / "trace.txt")
    return tmp_path


def sha(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def lines(here) -> list[str]:
    return status_lines(Session.load(here))


def test_no_session(here):
    assert lines(here) == [f"no trace remembered in {here}/.tracecli: run tracecli inspect TRACE"]
    assert run("status").stdout == lines(here)[0] + "\n"


def test_remembered_trace(here):
    assert run("inspect", "trace.txt", "--format", "chainer").exit_code == 0
    assert lines(here) == [
        "trace: trace.txt (unchanged)",
        f"  path: {here}/trace.txt",
        f"  sha256: {sha(here / 'trace.txt')}",
        "  --format: chainer",
        "plan: none (tracecli plan-buckets remembers the plan it prints)",
        f"reset: delete {here}/.tracecli/",
    ]
    assert run("status").stdout == "\n".join(lines(here)) + "\n"


def test_remembered_sizes_and_step(here):
    shutil.copy(RESNET, here / "r.txt")
    assert run("inspect", "r.txt", "--sizes", RESNET_SIZES).exit_code == 0
    got = lines(here)
    assert got[0] == "trace: r.txt (unchanged)" and got[3] == f"  --sizes: {RESNET_SIZES}"
    shutil.copy(DDP_GPU, here / "g.json.gz")
    assert run("inspect", "g.json.gz", "--step", "6").exit_code == 0
    got = lines(here)
    assert got[0] == "trace: g.json.gz (unchanged)" and got[3] == "  --step: 6"


def test_changed_trace(here):
    assert run("inspect", "trace.txt").exit_code == 0
    assert run("plan-buckets", "--strategy", "ddp").exit_code == 0
    (here / "trace.txt").write_text((FIXTURES / "mlp_chainer.txt").read_text())
    session = Session.load(here)
    assert status_lines(session) == [
        "trace: trace.txt (changed since it was remembered)",
        f"  path: {here}/trace.txt",
        f"  sha256: {sha(here / 'trace.txt')}",  # refreshed to the new content
        "plan: none (tracecli plan-buckets remembers the plan it prints)",  # stale: forgotten
        f"reset: delete {here}/.tracecli/",
    ]
    assert session.notices == []  # status says it in its lines, not as a notice


def test_gone_trace(here):
    assert run("inspect", "trace.txt").exit_code == 0
    os.unlink(here / "trace.txt")
    assert lines(here)[0] == "trace: trace.txt (gone)"


def test_remembered_plan(here):
    """The plan's options: only those its strategy reads (horovod: not tf-spec's --spec), and
    no flag left off (issue 17 item 13)."""
    assert run("inspect", "trace.txt").exit_code == 0
    assert run("plan-buckets", "--strategy", "horovod", "--max-bytes", "4MiB",
               "--cycle-ms", "2.5").exit_code == 0
    got = lines(here)
    assert got == [
        "trace: trace.txt (unchanged)",
        f"  path: {here}/trace.txt",
        f"  sha256: {sha(here / 'trace.txt')}",
        "plan: horovod (.tracecli/plan.json)",  # as remembered, relative to the directory
        "  --max-bytes: 4194304",
        "  --cycle-ms: 2.5",
        f"reset: delete {here}/.tracecli/",
    ]
    assert run("status").stdout == "\n".join(got) + "\n"
