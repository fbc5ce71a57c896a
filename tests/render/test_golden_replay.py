"""Golden files for the replay and calibration views, rendered from fixed hand-written
reports (no ranks started) at 80 columns with colour off.

TRACECLI_UPDATE_GOLDEN=1 rewrites the goldens (see test_golden.py).
"""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from tracecli.costs import AlphaBeta, CalibrationProfile, ProfilePoint
from tracecli.planning.base import Grad, PlanInput
from tracecli.planning import options_of
from tracecli.planning.plan import BucketPlan
from tracecli.planning.timeline import BucketTiming, Timeline
from tracecli.render.replay import calibration_view, replay_view
from tracecli.replay.report import MeasuredBucket, MeasuredRun, ReplayInfo, ReplayReport

from conftest import check_golden


def replay_report(verified: bool = True, bare: bool = True) -> ReplayReport:
    cost = AlphaBeta("10gbe", 50.0, 1.1, 2, source="10 Gb Ethernet (TCP): ~1.1 GB/s of 1.25 GB/s")
    grads = (Grad("a", 4 << 20, "float32", 1 << 20, 15.0, 0),
             Grad("b", 25 << 20, "float32", 25 << 18, 22.5, 1),
             Grad("c", 4480, "float32", 1120, 30.0, 2))
    inp = PlanInput(grads, 10.0, 30.0, 0.0, "roofline estimate on h100")
    predicted = ((15.0, 18.863), (22.5, 46.383), (46.383, 46.437))
    timings = tuple(BucketTiming(k, (k,), g.nbytes, "float32", start, start, end)
                    for k, (g, (start, end)) in enumerate(zip(grads, predicted)))
    timeline = Timeline(timings, 10.0, 30.0, 0.0, 46.437, 30.0, 16.437, 27.8)
    plan = BucketPlan("size", options_of("size"), cost, inp, timeline, 40.0, {})
    measured = ((15.5, 20.25, 4.75, 4.125), (23.0, 49.5, 26.5, 25.0), (49.5, 49.75, 0.25, 0.125))
    buckets = tuple(MeasuredBucket(k, start, start, end, dur, dur, bare_ms if bare else None)
                    for k, (start, end, dur, bare_ms) in enumerate(measured))
    run = MeasuredRun(50.0, 52.5, (50.0,), 20.0, 31.5, buckets)
    info = ReplayInfo("gloo", "cpu (2 cores)", 2, 20, 3, verified, "10gbe", None, ())
    return ReplayReport(plan, run, 7.6728, info)


POINTS = ((4096, 0.024, 0.025, 0.0250), (1 << 20, 0.031, 0.032, 0.0308),
          (64 << 20, 0.41, 0.42, 0.3853), (256 << 20, 1.52, 1.55, 1.5036))
CALIBRATION = CalibrationProfile(
    "nccl", "2x NVIDIA H100 80GB HBM3", 2, "ring", 12.5, 180.0, 0.9987, 3.25, False,
    tuple(ProfilePoint(n, mean, median, predicted_ms=pred) for n, median, mean, pred in POINTS))


def render(renderable) -> str:
    """What the CLI prints: its console (no highlighting, no soft wrap) at 80 columns, no colour."""
    out = Console(file=io.StringIO(), width=80, color_system=None, highlight=False,
                  soft_wrap=False, force_terminal=False)
    out.print(renderable)
    return out.file.getvalue()


def test_replay_view_golden():
    check_golden("replay_view.txt", render(replay_view(replay_report())))


def test_replay_view_unverified_without_baseline_top_golden():
    report = replay_report(verified=False, bare=False)
    check_golden("replay_view_unverified_top2.txt", render(replay_view(report, top=2)))


def test_calibration_view_golden():
    check_golden("calibration_view.txt", render(calibration_view(CALIBRATION)))


def test_calibration_view_poor_fit_golden():
    """A poor fit says so (here every point's mean is its median)."""
    profile = replace(CALIBRATION, r2=0.42, mape_pct=31.0, poor=True,
                      points=tuple(replace(p, mean_ms=p.median_ms) for p in CALIBRATION.points))
    check_golden("calibration_view_poor.txt", render(calibration_view(profile)))
