"""Progress on stderr (issue 26 item 2): a bar where stderr is a terminal; without one, one
line a phase once the work has run 5 s, and nothing for quicker work."""

from __future__ import annotations

import pytest

import tracecli.cli.progress as progress
from tracecli.cli.progress import PHASE_LINE, PhaseLines, describe

from conftest import FIXTURES, RESNET, run

RUN = FIXTURES / "multirank" / "gloo2_clean"


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_quick_work_prints_nothing():
    said: list[str] = []
    lines = PhaseLines(said.append, after_s=60)
    lines("starting 2 ranks", 0, 2)
    lines("starting 2 ranks", 2, 2)
    lines("replay", 1, 45)
    lines.close()
    assert said == []
    lines.timer.join()
    assert said == []  # a closed reporter stays silent


def test_long_work_says_each_phase_once_from_the_moment_it_is_late():
    said: list[str] = []
    clock = Clock()
    lines = PhaseLines(said.append, after_s=0.01, clock=clock)
    lines("starting 2 ranks", 0, 2)
    clock.now += 7
    lines.timer.join()  # 5 s (here 0.01) passed: the phase under way is said
    assert said == ["tracecli: [7 s] starting 2 ranks"]
    lines("starting 2 ranks", 2, 2)  # the same phase: nothing more
    lines("calibrate", 1, 6)
    clock.now += 20
    lines("calibrate", 2, 6)
    lines("replay", 1, 45)
    lines("replay", 2, 45)
    lines.close()
    assert said == ["tracecli: [7 s] starting 2 ranks", "tracecli: [7 s] calibrating",
                    "tracecli: [27 s] replaying 45 iterations"]
    assert all(PHASE_LINE.match(x) for x in said)


def test_stages_are_named_for_a_person():
    assert describe("replay", 1045) == "replaying 1,045 iterations"
    assert describe("parse", 250_000) == "parsing 250,000 records"
    assert describe("reading 8 rank traces", 8) == "reading 8 rank traces"


def test_a_run_read_past_the_threshold_says_so(monkeypatch):
    monkeypatch.setattr(progress, "AFTER_S", 0)
    result = run("inspect", RUN)
    assert result.exit_code == 0, result.output
    assert "tracecli: [0 s] reading 2 rank traces" in result.stderr.splitlines()


@pytest.mark.slow
def test_replay_with_stdout_piped_says_its_phases(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(progress, "AFTER_S", 0)
    result = run("replay", RESNET, "--backward-ms", "20", "--gpus", "2", "--iters", "3",
                 "--warmup", "1", "--backend", "gloo")
    assert result.exit_code == 0, result.output
    phases = [x for x in result.stderr.splitlines() if PHASE_LINE.match(x)]
    assert [x.split("] ", 1)[1] for x in phases] == ["starting 2 ranks", "calibrating",
                                                       "replaying 4 iterations"]
