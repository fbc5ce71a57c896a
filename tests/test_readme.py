"""The README stays a first five minutes: short, its set-up commands real, and the three
promised lines working as it says on each sample. (tests/test_docs.py runs its examples and
checks its links and options, as it does for docs/.)"""

from __future__ import annotations

import os
import re

import pytest

from conftest import DDP_GPU, RESNET, ROOT, VGG, run

README = (ROOT / "README.md").read_text()
THREE_LINES = ["tracecli inspect sample_traces/vgg19_chainer.txt",
               "tracecli plan-buckets --max-bytes 32k",
               "tracecli replay --gpus 4"]


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 150


def test_the_two_setup_commands_are_make_targets():
    makefile = (ROOT / "Makefile").read_text()
    targets = re.findall(r"^make (\w+)", README, re.M)
    assert {"demo", "test"} <= set(targets)
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "TORCH_INDEX" in makefile and "make test TORCH_INDEX=" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_the_three_lines_are_shown_as_typed():
    shown = [line.split("#")[0].strip() for line in README.splitlines() if line.startswith("tracecli ")]
    assert shown == THREE_LINES


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A fresh directory for the session the three lines keep."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_three_lines_work_as_typed_on_the_chainer_dump(here):
    """As typed (replay as a dry run: the real replay of this plan takes minutes on a small
    CPU machine; tests/replay/test_replay.py replays plans for real)."""
    assert run("inspect", VGG).exit_code == 0
    assert run("plan-buckets", "--max-bytes", "32k").exit_code == 0
    result = run("replay", "--gpus", "4", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "replaying the plan remembered by tracecli plan-buckets (size" in result.stderr


def test_the_op_list_needs_backward_ms_and_nothing_else(here):
    assert run("inspect", RESNET).exit_code == 0
    refused = run("plan-buckets", "--max-bytes", "32k")
    assert refused.exit_code == 2 and "--backward-ms" in refused.stderr
    assert "--backward-ms 120" in README
    assert run("plan-buckets", "--max-bytes", "32k", "--backward-ms", "120").exit_code == 0
    assert run("replay", "--gpus", "4", "--dry-run").exit_code == 0


def test_the_profiler_sample_has_no_shapes_and_observed_plans_it(here):
    assert run("inspect", DDP_GPU).exit_code == 0
    refused = run("plan-buckets", "--max-bytes", "32k")
    assert refused.exit_code == 2 and "record_shapes" in refused.stderr
    assert "--strategy observed" in refused.stderr and "--strategy observed" in README
    assert run("plan-buckets", "--strategy", "observed").exit_code == 0
    replayed = run("replay", "--gpus", "4", "--dry-run")
    assert replayed.exit_code == 0 and "Plan observed: 5 buckets" in replayed.stdout
