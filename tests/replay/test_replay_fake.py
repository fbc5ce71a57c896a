"""Replay's logic on a fake collective backend: N ranks as threads of this process.

No rank process is spawned and no process group is joined (tests/replay/test_replay.py runs the
real gloo path). Sizes are small and iterations few; timing bounds are one-sided (a loaded
machine only makes things later), so these do not flake on a busy 2-core machine.
"""

from __future__ import annotations

import statistics

import pytest

from tracecli.costs import resolve_cost_model
from tracecli.model import CollectiveKind
from tracecli.planning.base import FixedPlan, Grad, PlanInput
from tracecli.planning.spec import NoOptions
from tracecli.replay.jobs import CalibrationJob, ReplayJob, Sweep
from tracecli.replay.report import replay_report

torch = pytest.importorskip("torch", reason="the fake backend computes with torch tensors")

from tracecli.replay.fakecomm import FakeWorld, run_fake  # noqa: E402
from tracecli.replay.records import ReplayRun, SweepRun  # noqa: E402

ALL_REDUCE, ALL_GATHER = CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER
EPS = 1e-6
SMALL_SWEEP = Sweep(4096, 65536, points=3, warmup=1, iters=2)


def small_job(world: int, cost=True, **kw) -> ReplayJob:
    """Four gradients of 4-16 KiB, ready every 2 ms; buckets (0, 1), (2,), (3,), the last an
    all-gather (a sparse gradient)."""
    grads = (Grad("a", 4096, "float32", 1024, 2.0, 0), Grad("b", 8192, "float32", 2048, 4.0, 1),
             Grad("c", 16384, "float32", 4096, 6.0, 2),
             Grad("d", 4096, "float32", 1024, 8.0, 3, sparse=True))
    fixed = FixedPlan(((0, 1), (2,), (3,)), "fixed", (ALL_REDUCE, ALL_REDUCE, ALL_GATHER))
    model = resolve_cost_model(world, "10gbe") if cost else None
    kw = {"iters": 3, "warmup": 1, "sweep": SMALL_SWEEP, "calibration_budget_s": 0.0, **kw}
    return ReplayJob(PlanInput(grads, 1.0, 12.0, 1.0), "fixed", NoOptions(), model,
                     "10gbe", fixed=fixed, **kw)


def bucket_delay(ms: float, rank=None):
    """``ms`` in every bucket-sized sum or gather (on ``rank`` only, if given)."""
    def delay(r, what, nbytes):
        big = what in ("all_reduce:sum", "all_gather") and nbytes >= 4096
        return ms if big and (rank is None or r == rank) else 0.0
    return delay


def check_one_channel(run: ReplayRun) -> None:
    """Per rank and iteration: buckets launched in order, none before its ready time, each
    started after its launch and after the one before it ended."""
    ready = [b.ready_ms for b in run.plan.timeline.buckets]
    for rank in run.ranks:
        for it in rank.iterations:
            for k in range(len(ready)):
                assert it.launch_ms[k] >= ready[k] - EPS
                assert it.start_ms[k] >= it.launch_ms[k] - EPS and it.end_ms[k] >= it.start_ms[k]
                if k:
                    assert it.launch_ms[k] >= it.launch_ms[k - 1]
                    assert it.start_ms[k] >= it.end_ms[k - 1] - EPS
            assert it.iteration_ms >= max(it.end_ms) - EPS


@pytest.mark.parametrize("world", [2, 4])
def test_replay_on_fake_ranks_is_verified_and_runs_one_channel(world):
    job = small_job(world)
    fake = FakeWorld(world, delay=bucket_delay(5.0))
    run = run_fake(job, fake)
    assert isinstance(run, ReplayRun) and run.verified and run.world == world
    assert [r.rank for r in run.ranks] == list(range(world))
    assert all(len(r.iterations) == job.iters for r in run.ranks)
    check_one_channel(run)
    report = replay_report(job, run)
    assert report.verified and report.replay.ranks == world and report.replay.backend == "fake"
    assert [b.collective for b in report.replay.buffers] == [ALL_REDUCE, ALL_REDUCE, ALL_GATHER]
    measured = report.measured.buckets
    for k, (b, m) in enumerate(zip(run.plan.timeline.buckets, measured)):
        assert m.ready_ms >= b.ready_ms - EPS and m.start_ms >= m.ready_ms - EPS
        assert m.duration_ms >= 5.0 and m.mean_duration_ms >= 5.0
        if k:
            assert m.start_ms >= measured[k - 1].end_ms - EPS
    assert report.measured.iteration_ms >= 12.0 + 1.0  # backward end, then the update
    # every rank issued the same collectives: per step a start instant, then the buckets in order
    sizes = [b.elements * 4 for b in report.replay.buffers]
    step = [("broadcast:0", 8), ("all_reduce:sum", sizes[0]), ("all_reduce:sum", sizes[1]),
            ("all_gather", sizes[2])]
    for log in fake.log:
        assert log[:4 * (job.warmup + job.iters)] == step * (job.warmup + job.iters)
        assert log[4 * (job.warmup + job.iters)] == ("all_reduce:max", 8)  # verified everywhere
        assert log == fake.log[0]


def test_a_wrong_sum_is_not_verified():
    run = run_fake(small_job(2), FakeWorld(2, wrong_sum_rank=1))
    assert run.verified is False and replay_report(small_job(2), run).verified is False


def test_the_slowest_rank_sets_the_report():
    job = small_job(2)
    run = run_fake(job, FakeWorld(2, delay=bucket_delay(20.0, rank=1)))
    assert run.verified
    check_one_channel(run)
    slow = run.ranks[1].iterations
    assert all(it.end_ms[k] - it.start_ms[k] >= 20.0 for it in slow for k in range(3))
    report = replay_report(job, run)
    both = [r.iterations for r in run.ranks]
    assert report.measured.iterations_ms == tuple(
        max(its[i].iteration_ms for its in both) for i in range(job.iters))
    for k, m in enumerate(report.measured.buckets):
        assert m.end_ms == statistics.median(max(its[i].end_ms[k] for its in both)
                                             for i in range(job.iters))
        assert m.duration_ms >= 20.0


def test_in_place_calibration_measures_every_bucket_size():
    job = small_job(2, cost=False)
    # a time that grows with size, so the line fits
    fake = FakeWorld(2, delay=lambda r, what, n: 1.0 + n / 8192 if what == "all_reduce:sum" else 0.0)
    run = run_fake(job, fake)
    assert run.verified and run.calibration is not None
    measured = {p.bytes for p in run.calibration.points}
    buckets = [b for b in run.plan.timeline.buckets]
    wanted = {info.elements * 4 for info in run.buffers if info.collective is ALL_REDUCE}
    assert len(buckets) == 3 and wanted <= measured
    assert set(SMALL_SWEEP.sizes()) <= measured
    assert run.calibration.bandwidth_gbps > 0
    assert all(p.mean_ms >= 1.0 and p.queued_mean_ms >= 1.0 for p in run.calibration.points)
    report = replay_report(job, run)
    assert report.replay.cost_source == "in-place calibration" and report.verified


def test_calibration_sweep_on_fake_ranks():
    fake = FakeWorld(2, delay=lambda r, what, n: 2.0 if what == "all_reduce:sum" else 0.0)
    run = run_fake(CalibrationJob(SMALL_SWEEP), fake)
    assert isinstance(run, SweepRun) and run.world == 2 and run.backend == "fake"
    assert [p.bytes for p in run.points] == SMALL_SWEEP.sizes()
    for p in run.points:
        assert len(p.times_ms) == SMALL_SWEEP.iters and min(p.times_ms) >= 2.0
        assert p.queued_mean_ms >= 2.0


def test_a_failing_rank_raises_its_own_error_and_frees_the_others():
    class Broken(FakeWorld):
        def exchange(self, rank, what, value, nbytes):
            if rank == 1 and what == "all_gather":
                raise ValueError("rank 1 broke")
            return super().exchange(rank, what, value, nbytes)

    with pytest.raises(ValueError, match="rank 1 broke"):
        run_fake(small_job(2), Broken(2, timeout_s=20))


@pytest.mark.parametrize("world", [2, 3, 4])
def test_reduce_scatter_buckets_hold_each_ranks_shard_of_the_sum(world):
    """A reduce-scatter bucket (its row in buckets.KINDS): the input is the whole bucket,
    padded to a multiple of the ranks; each rank's output is its shard of the sum."""
    from dataclasses import replace

    job = small_job(world)
    fixed = FixedPlan(((0, 1), (2,), (3,)), "fixed", (CollectiveKind.REDUCE_SCATTER, ALL_REDUCE,
                                                      CollectiveKind.REDUCE_SCATTER))
    run = run_fake(replace(job, fixed=fixed), world)
    assert run.verified
    infos = [b for b in run.buffers if b.collective is CollectiveKind.REDUCE_SCATTER]
    assert len(infos) == 2 and all(b.elements % world == 0 for b in infos)
    from tracecli.replay.buckets import BucketBuffer

    buf = BucketBuffer(4096 + 4, "float32", CollectiveKind.REDUCE_SCATTER, world, "cpu")
    buf.fill(1 % world)
    buf.output.fill_(0)
    assert not buf.verify()  # an output that is not the shard is caught
