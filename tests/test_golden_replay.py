"""Golden files for the replay and calibration views, rendered from fixed hand-written reports
(no ranks started) at 80 columns with colour off.

The reports below are the dicts ``replay --json`` and ``calibrate --json`` print today, cut
down to the keys the views read; when the reports become typed dataclasses, build the same
values here and keep the goldens. TRACECLI_UPDATE_GOLDEN=1 rewrites the goldens (see
test_golden.py).
"""

from __future__ import annotations

import copy
import io

from rich.console import Console

from tracecli.render.replay import calibration_view, replay_view

from conftest import check_golden

REPLAY = {
    "strategy": "size",
    "cost_model": {"name": "10gbe", "alpha_us": 50.0, "bandwidth_gbps": 1.1,
                   "source": "10 Gb Ethernet (TCP): ~1.1 GB/s of 1.25 GB/s"},
    "compute": {"source": "roofline estimate on h100", "forward_ms": 10.0, "backward_ms": 20.0},
    "buckets": [
        {"index": 0, "bytes": 4 << 20, "start_ms": 15.0, "end_ms": 18.863, "duration_ms": 3.863,
         "measured": {"start_ms": 15.5, "end_ms": 20.25, "duration_ms": 4.75,
                      "bare_allreduce_ms": 4.125}},
        {"index": 1, "bytes": 25 << 20, "start_ms": 22.5, "end_ms": 46.383, "duration_ms": 23.883,
         "measured": {"start_ms": 23.0, "end_ms": 49.5, "duration_ms": 26.5,
                      "bare_allreduce_ms": 25.0}},
        {"index": 2, "bytes": 4480, "start_ms": 46.383, "end_ms": 46.437, "duration_ms": 0.054,
         "measured": {"start_ms": 49.5, "end_ms": 49.75, "duration_ms": 0.25,
                      "bare_allreduce_ms": 0.125}},
    ],
    "predicted": {"iteration_ms": 46.437, "exposed_comm_ms": 16.437},
    "measured": {"iteration_ms": 50.0, "iteration_p90_ms": 52.5, "exposed_comm_ms": 20.0},
    "error_pct": 7.6728,
    "replay": {"backend": "gloo", "device": "cpu (2 cores)", "ranks": 2, "iters": 20,
               "warmup": 3, "verified": True},
}

CALIBRATION = {
    "backend": "nccl", "device": "2x NVIDIA H100 80GB HBM3", "gpus": 2, "algorithm": "ring",
    "alpha_us": 12.5, "bandwidth_gbps": 180.0,
    "fit": {"r2": 0.9987, "mape_pct": 3.25, "poor": False},
    "points": [
        {"bytes": 4096, "median_ms": 0.024, "mean_ms": 0.025, "predicted_ms": 0.0250},
        {"bytes": 1 << 20, "median_ms": 0.031, "mean_ms": 0.032, "predicted_ms": 0.0308},
        {"bytes": 64 << 20, "median_ms": 0.41, "mean_ms": 0.42, "predicted_ms": 0.3853},
        {"bytes": 256 << 20, "median_ms": 1.52, "mean_ms": 1.55, "predicted_ms": 1.5036},
    ],
}


def render(renderable) -> str:
    """What the CLI prints: its console (no highlighting, no soft wrap) at 80 columns, no colour."""
    out = Console(file=io.StringIO(), width=80, color_system=None, highlight=False,
                  soft_wrap=False, force_terminal=False)
    out.print(renderable)
    return out.file.getvalue()


def test_replay_view_golden():
    check_golden("replay_view.txt", render(replay_view(REPLAY)))


def test_replay_view_unverified_without_baseline_top_golden():
    doc = copy.deepcopy(REPLAY)
    doc["replay"]["verified"] = False
    for b in doc["buckets"]:
        del b["measured"]["bare_allreduce_ms"]
    check_golden("replay_view_unverified_top2.txt", render(replay_view(doc, top=2)))


def test_calibration_view_golden():
    check_golden("calibration_view.txt", render(calibration_view(CALIBRATION)))


def test_calibration_view_poor_fit_golden():
    """A poor fit says so; a profile without mean times (an older file) shows its medians."""
    doc = copy.deepcopy(CALIBRATION)
    doc["fit"] = {"r2": 0.42, "mape_pct": 31.0, "poor": True}
    for pt in doc["points"]:
        del pt["mean_ms"]
    check_golden("calibration_view_poor.txt", render(calibration_view(doc)))
