"""Replay pieces without ranks: the fit, the sweep, buffer patterns, the report."""

from __future__ import annotations

import pytest

from tracecli.costs import CalibrationProfile, ProfilePoint, fit_ring, resolve_cost_model
from tracecli.errors import CalibrationError
from tracecli.model import CollectiveKind
from tracecli.planning import make_plan, options_of
from tracecli.planning.base import Grad, PlanInput
from tracecli.replay.jobs import ReplayJob, Sweep
from tracecli.replay.report import p90, replay_report
from tracecli.replay.records import RankResult, ReplayRun, StepTimes

ALL_REDUCE, ALL_GATHER = CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER


def profile(points, world=2):
    """The calibration profile of measured points given as dicts."""
    return CalibrationProfile.measured(
        [ProfilePoint(p["bytes"], p["mean_ms"], p["median_ms"], tuple(p["times_ms"]),
                      queued_mean_ms=p.get("queued_mean_ms")) for p in points], world, "gloo", "cpu")


def test_fit_recovers_alpha_and_bandwidth():
    # 4 ranks, alpha 20 us, B 5 GB/s: t = 6 * 0.02 + 1.5 * n / 5e6 ms
    points = [(n, 6 * 0.02 + 1.5 * n / 5e6) for n in (4096, 65536, 1 << 20, 16 << 20, 256 << 20)]
    fit = fit_ring(points, ranks=4)
    assert fit.alpha_us == pytest.approx(20.0) and fit.bandwidth_gbps == pytest.approx(5.0)
    assert fit.r2 == pytest.approx(1.0) and fit.mape_pct == pytest.approx(0.0, abs=1e-9)
    assert not fit.poor


def test_fit_reports_a_poor_fit():
    # a step in the middle that no straight line explains (gloo changes algorithm)
    points = [(4096, 0.4), (65536, 0.4), (600_000, 3.5), (3_000_000, 4.2), (16_000_000, 15.5)]
    assert fit_ring(points, ranks=2).poor


@pytest.mark.parametrize("points,ranks,words", [
    ([(1, 1.0), (2, 2.0)], 1, "2 ranks"),
    ([(1024, 1.0), (1024, 1.1)], 2, "2 or more sizes"),
    ([(1024, 2.0), (1 << 20, 1.0)], 2, "do not grow"),
])
def test_fit_errors(points, ranks, words):
    with pytest.raises(CalibrationError, match=words):
        fit_ring(points, ranks)


def test_sweep_sizes_are_log_spaced_and_aligned():
    sizes = Sweep(min_bytes=4096, max_bytes=256 << 20, points=12).sizes()
    assert sizes[0] == 4096 and sizes[-1] == 256 << 20 and len(sizes) == 12
    assert all(s % 4 == 0 for s in sizes) and sizes == sorted(set(sizes))
    assert Sweep(min_bytes=4096, max_bytes=4096, points=5).sizes() == [4096]


def test_p90():
    assert p90([5.0]) == 5.0
    assert p90([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(4.6)
    assert p90([float(i) for i in range(1, 11)]) == pytest.approx(9.1)


torch = pytest.importorskip("torch", reason="buffer patterns need torch")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("world", [1, 2, 3, 8, 64])
def test_patterns_sum_exactly_and_corruption_is_caught(dtype, world):
    from tracecli.replay.buckets import BucketBuffer

    def buffers():
        return [BucketBuffer(n * 8, dtype, ALL_REDUCE, world, "cpu") for n in (1, 2, 7, 1000)]

    total = buffers()
    for b in total:
        b.input.zero_()
    for rank in range(world):
        mine = buffers()
        for b in mine:
            b.fill(rank)
        for t, m in zip(total, mine):
            t.input += m.input
    assert all(b.verify() for b in total)
    total[2].input[3] += 1
    assert not total[2].verify()


@pytest.mark.parametrize("world", [1, 2, 5])
def test_allgather_buckets_hold_every_rank_in_order(world):
    from tracecli.replay.buckets import BucketBuffer

    pieces = []
    for rank in range(world):
        b = BucketBuffer(40, "float32", ALL_GATHER, world, "cpu")
        b.fill(rank)
        pieces.append(b.input.clone())
    gathered = BucketBuffer(40, "float32", ALL_GATHER, world, "cpu")
    gathered.output.copy_(torch.cat(pieces))
    assert gathered.verify() and gathered.output.numel() == world * 10
    if world > 1:
        gathered.output.copy_(torch.cat(pieces[::-1]))
        assert not gathered.verify()


def synthetic_job():
    grads = tuple(Grad(f"g{i}", 1 << 20, "float32", 1 << 18, 10.0 + i, i) for i in range(4))
    inp = PlanInput(grads, 5.0, 20.0)
    return ReplayJob(inp, "per-tensor", options_of("per-tensor"), resolve_cost_model(2, "10gbe"), "10gbe", 3, 1)


def test_replay_report_takes_the_slowest_rank_and_medians():
    job = synthetic_job()
    plan = make_plan(job.inp, job.strategy, job.options, job.cost)

    def iteration(total, shift):
        launch = [10.0, 11.0, 12.0, 13.0]
        start = [x + shift for x in launch]
        return StepTimes(total, tuple(launch), tuple(start), tuple(s + 1.0 for s in start))

    ranks = (RankResult(0, (iteration(30.0, 0.0), iteration(32.0, 0.0), iteration(40.0, 0.0))),
             RankResult(1, (iteration(31.0, 0.5), iteration(31.0, 0.5), iteration(39.0, 0.5))))
    run = ReplayRun(ranks, True, None, plan, "cpu", "gloo", 2, (0.5, 0.5, 0.5, 0.5), ())
    report = replay_report(job, run)
    assert report.verified and report.measured.buckets[0].overhead_pct == pytest.approx(100.0)
    doc = report.to_json()
    assert doc["measured"]["iterations_ms"] == [31.0, 32.0, 40.0]  # slowest rank each time
    assert doc["measured"]["iteration_ms"] == 32.0
    first = doc["measured"]["buckets"][0]
    assert first["start_ms"] == 10.5 and first["end_ms"] == 11.5 and first["duration_ms"] == 1.0
    assert first["overhead_pct"] == pytest.approx(100.0)
    predicted = doc["predicted"]["iteration_ms"]
    assert doc["error_pct"] == pytest.approx(100 * (32.0 - predicted) / predicted)
    assert doc["buckets"][0]["measured"]["bare_allreduce_ms"] == 0.5


def test_calibration_report_is_a_profile_plan_buckets_reads(tmp_path):
    import json

    from tracecli.costs import profile_model, read_profile

    points = [{"bytes": n, "median_ms": 0.1 + n / 1e6 + 0.01, "mean_ms": 0.1 + n / 1e6,
               "times_ms": [0.1 + n / 1e6]} for n in (4096, 1 << 20, 16 << 20)]
    doc = profile(points).to_json()
    assert [p["predicted_ms"] for p in doc["points"]] == pytest.approx([p["mean_ms"] for p in points])
    assert list(doc["points"][0]) == ["bytes", "times_ms", "median_ms", "mean_ms", "queued_times_ms",
                                      "queued_median_ms", "queued_mean_ms", "predicted_ms"]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    model = profile_model(read_profile(path), path)
    assert model.line.alpha_us == pytest.approx(50.0)
    assert model.line.bandwidth_gbps == pytest.approx(1.0)
    # the measured means answer for their sizes, log-log between, the line beyond
    assert model.measured and model.time_ms(ALL_REDUCE, 1 << 20) == pytest.approx(points[1]["mean_ms"])
    assert model.basis(ALL_REDUCE, 1 << 20) == "measured"
    assert model.basis(ALL_REDUCE, 2 << 20) == "interpolated"
    assert model.basis(ALL_GATHER, 1 << 20) is None  # nothing measured all-gathers
    assert model.time_ms(ALL_REDUCE, 32 << 20) == pytest.approx(points[2]["mean_ms"] + (16 << 20) / 1e6)


@pytest.mark.parametrize("visible,nccl,gpus,backend,expected", [
    (8, True, 4, "auto", ("nccl", None)),
    (2, True, 4, "auto", "gloo"),
    (8, False, 4, "auto", "gloo"),
    (0, True, 2, "gloo", ("gloo", None)),
    (2, True, 2, "nccl", ("nccl", None)),
])
def test_backend_choice(monkeypatch, visible, nccl, gpus, backend, expected):
    import torch.distributed as dist

    from tracecli.replay.jobs import Ranks
    from tracecli.replay.processes import resolve_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: nccl)
    got = resolve_backend(Ranks(gpus, backend))
    if expected == "gloo":
        assert got[0] == "gloo" and "running gloo on CPU" in got[1]
    else:
        assert got == expected


def test_forced_nccl_with_too_few_gpus(monkeypatch):
    import torch.distributed as dist

    from tracecli.errors import ReplayUnavailableError
    from tracecli.replay.jobs import Ranks
    from tracecli.replay.processes import resolve_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    with pytest.raises(ReplayUnavailableError, match="needs 4 CUDA devices on this node, 2 visible"):
        resolve_backend(Ranks(4, "nccl"))


def test_measured_model_queued_curve_and_timeline():
    from tracecli.planning.base import Grouping
    from tracecli.costs import AlphaBeta, Measured, monotone
    from tracecli.planning.timeline import simulate

    alone = ((1 << 20, 2.0), (8 << 20, 10.0))
    queued = ((1 << 20, 1.0), (8 << 20, 8.0))
    model = Measured(AlphaBeta("m", 100.0, 1.0, 2), alone, 2, queued)
    assert model.time_ms(ALL_REDUCE, 1 << 20) == 2.0
    assert model.time_ms(ALL_REDUCE, 1 << 20, queued=True) == 1.0
    grads = [Grad("a", 1 << 20, "float32", 1 << 18, 0.0, 0), Grad("b", 1 << 20, "float32", 1 << 18, 0.5, 1),
             Grad("c", 8 << 20, "float32", 1 << 21, 50.0, 2)]
    t = simulate(grads, Grouping([(0,), (1,), (2,)]), model, 0.0, 60.0)
    # a: alone after idle; b: ready while a runs, so queued; c: ready long after, alone again
    assert [b.duration_ms for b in t.buckets] == [2.0, 1.0, 10.0]
    assert monotone([(1, 3.0), (2, 1.0)]) == ((1, 2.0), (2, 2.0))
    # other rank counts fall back to the line
    assert not model.on(4).measured


def test_profile_points_drive_plan_buckets(tmp_path):
    import json
    from conftest import VGG, run

    points = [{"bytes": n, "median_ms": t, "mean_ms": t, "queued_mean_ms": t * 0.8, "times_ms": [t]}
              for n, t in ((1 << 20, 1.0), (64 << 20, 40.0), (512 << 20, 300.0))]
    doc = profile(points).to_json()
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    plan = json.loads(run("plan-buckets", VGG, "--calibration", path, "--strategy", "size",
                          "--max-bytes", "64MiB", "--json").stdout)
    assert plan["gpus"] == 2 and plan["cost_model"]["uses_measurements"] is True
    assert plan["cost_model"]["measured_sizes"] == [1 << 20, 64 << 20, 512 << 20]
    assert {b["cost_basis"] for b in plan["buckets"]} <= {"measured", "interpolated", "extrapolated"}
    assert "cost_basis" in plan["buckets"][0]


def test_calibration_memory_counts_every_sweep_size_at_once(monkeypatch):
    """Sizes are measured interleaved, so a rank holds a buffer of each at the same time."""
    from tracecli.errors import ReplayUnavailableError
    from tracecli.replay import validate

    sweep = Sweep()  # calibrate's default: 12 sizes, 4 KiB to 256 MiB
    per_rank = sum(sweep.sizes())
    assert per_rank > max(sweep.sizes()) * 1.2
    need = 2 * (per_rank + validate.RANK_OVERHEAD_BYTES)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setattr(validate, "available_memory", lambda: need)
    validate.check_sweep(sweep, 2, "gloo")
    monkeypatch.setattr(validate, "available_memory", lambda: need - 1)
    with pytest.raises(ReplayUnavailableError, match="this calibration needs"):
        validate.check_sweep(sweep, 2, "gloo")


def synthetic_report(scale: float = 1.0, bare: bool = False):
    """A replay report of VGG19's 32k plan on 2 ranks, measured times made up (each bucket
    0.2 ms later and 10% longer than predicted), every time multiplied by ``scale``."""
    from dataclasses import replace

    from tracecli import load_trace
    from tracecli.pipeline import ComputeRequest, inputs
    from tracecli.planning.timeline import Timeline

    from conftest import VGG

    _, _, inp = inputs(load_trace(VGG), ComputeRequest(device="v100"))
    plan = make_plan(inp, "size", dict(max_bytes=32 << 10), resolve_cost_model(2, "10gbe"))
    t = plan.timeline
    buckets = tuple(b._replace(ready_ms=b.ready_ms * scale, start_ms=b.start_ms * scale,
                               end_ms=b.end_ms * scale) for b in t.buckets)
    plan = replace(plan, timeline=Timeline(buckets, *(x * scale for x in t[1:])))
    starts = tuple(b.start_ms + 0.2 * scale for b in buckets)
    ends = tuple(s + 1.1 * b.duration_ms for s, b in zip(starts, buckets))
    times = StepTimes(max(ends[-1], plan.timeline.iteration_ms) * 1.05,
                      tuple(b.ready_ms for b in buckets), starts, ends)
    job = ReplayJob(inp, "size", options_of("size", {"max_bytes": 32 << 10}), plan.cost, "10gbe", 3, 1)
    run = ReplayRun((RankResult(0, (times,) * 3), RankResult(1, (times,) * 3)), True, None,
                    plan, "cpu (2 cores)", "gloo", 2,
                    tuple(b.duration_ms for b in buckets) if bare else None, ())
    return replay_report(job, run)


@pytest.mark.parametrize("scale,bare", [(1.0, False), (1000.0, True)])
def test_replay_view_is_whole_at_80_columns(scale, bare):
    """The report's tables cut no value at 80 columns, even with every time 1000x longer
    (seconds-long buckets) and a bare collective column."""
    import os

    from rich.console import Console

    from tracecli.render.replay import replay_view

    report = synthetic_report(scale, bare)
    console = Console(width=80, record=True, file=open(os.devnull, "w"))
    console.print(replay_view(report))
    text = console.export_text()
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    words = ("pred", "meas", "comm", "error", "p90") + (("bare",) if bare else ())
    assert all(word in text for word in words)  # no column dropped either
    assert f"{report.measured.iteration_ms:,.3f}" in text
