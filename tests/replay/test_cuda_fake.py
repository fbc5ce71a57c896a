"""The CUDA replay path on a fake GPU (tests/fake_cuda.py): issue 28, without a GPU.

Ranks are threads of this process on fake devices that run in virtual time, so the figures
are exact. Each test names the defect of issue 28 it shows fixed; each failed on the code
before the fix (see the issue's note). tests/replay/test_cuda_processes.py drives real rank
processes through the same fake.
"""

from __future__ import annotations

import datetime

import pytest

from tracecli.costs import resolve_cost_model
from tracecli.errors import ReplayUnavailableError
from tracecli.model import CollectiveKind
from tracecli.planning import options_of
from tracecli.planning.base import FixedPlan, Grad, PlanInput
from tracecli.planning.spec import NoOptions
from tracecli.replay.jobs import CalibrationJob, Ranks, ReplayJob, Sweep

torch = pytest.importorskip("torch", reason="the fake device computes with torch tensors")

from fake_cuda import Clock, FakeCuda, FakeNcclWorld, install, transfer_ms  # noqa: E402
from tracecli.replay.fakecomm import FakeWorld, run_fake  # noqa: E402
from tracecli.replay.report import replay_report  # noqa: E402

ALL_REDUCE, ALL_GATHER = CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER
SWEEP = Sweep(4096, 65536, points=3, warmup=1, iters=3)


def job(world: int = 2, ready=(2.0, 4.0, 6.0, 8.0), end: float = 12.0, update: float = 1.0,
        **kw) -> ReplayJob:
    """Four gradients of 4-16 KiB ready at ``ready``; buckets (0, 1), (2,), (3,), the last an
    all-gather (a sparse gradient)."""
    sizes = (4096, 8192, 16384, 4096)
    grads = tuple(Grad(n, b, "float32", b // 4, at, i, sparse=(i == 3))
                  for i, (n, b, at) in enumerate(zip("abcd", sizes, ready)))
    fixed = FixedPlan(((0, 1), (2,), (3,)), "fixed", (ALL_REDUCE, ALL_REDUCE, ALL_GATHER))
    kw = {"iters": 3, "warmup": 1, "sweep": SWEEP, "calibration_budget_s": 0.0, **kw}
    return ReplayJob(PlanInput(grads, 1.0, end, update), "fixed", NoOptions(),
                     resolve_cost_model(world, "10gbe"), "10gbe", fixed=fixed, **kw)


def bucket_ms(run) -> list[float]:
    """What each bucket's collective takes on the fake, alone (bytes as the fake counts them)."""
    kinds = {ALL_REDUCE: "all_reduce:sum", ALL_GATHER: "all_gather"}
    return [transfer_ms(kinds[b.collective], b.elements * 4, False) for b in run.buffers]


def test_start_events_follow_a_device_collective_so_host_skew_is_not_timed(monkeypatch):
    """Item 1: rank 1's host reaches every start event 5 ms after rank 0's (it returns late
    from synchronize); the devices must align on a collective before the start event, or
    rank 0 times rank 1's lateness as its collectives' duration."""
    late = lambda index, what: 5.0 if index == 1 and what == "synchronize" else 0.0  # noqa: E731
    cuda = install(monkeypatch, FakeCuda(2, host_cost=late))
    the_job = job()
    run = run_fake(the_job, FakeNcclWorld(2, cuda), backend="nccl")
    assert run.verified
    want = bucket_ms(run)
    for rank in run.ranks:
        for it in rank.iterations:
            for k, ms in enumerate(want):
                assert it.end_ms[k] - it.start_ms[k] == pytest.approx(ms, abs=1e-9)
    for device in cuda.devices:  # after each host sync, a 1-element collective before an event
        since_sync = None  # (the spin's calibration comes first)
        for op in device.ops:
            if op[0] == "sync":
                since_sync = []
            elif op[0] == "record" and op[1] == "compute" and since_sync is not None:
                assert any(o[0] == "wait" and o[1] == "compute" and o[3] <= 8
                           for o in since_sync), "a start event with no device alignment"
                since_sync = None
            elif since_sync is not None:
                since_sync.append(op)


def test_spins_are_kernels_of_at_most_50_ms(monkeypatch):
    """Item 4: a 300 ms backward is emulated by spin kernels of at most ~50 ms each (a
    display GPU kills kernels over ~2 s)."""
    cuda = install(monkeypatch, FakeCuda(2))
    the_job = job(ready=(75.0, 150.0, 225.0, 300.0), end=300.0, iters=1, warmup=0)
    run = run_fake(the_job, FakeNcclWorld(2, cuda), backend="nccl")
    spins = [op[4] for op in cuda.devices[0].ops if op[0] == "sleep"]
    assert max(spins) <= 50.0 + 1e-9 and sum(spins) >= 300.0
    assert run.ranks[0].iterations[0].iteration_ms >= 301.0


def test_spin_clock_drift_is_measured_per_step_and_not_counted_as_communication(monkeypatch):
    """Item 4: the SM clock slows by 20% once the spin is calibrated; each step's compute is
    measured from its compute_end event, the spin rescaled, and exposed communication is
    the iteration less the compute measured, not the compute planned."""
    cuda = install(monkeypatch, FakeCuda(2, clock=Clock(1.0e6, ((25.0, 0.8e6),))))
    the_job = job(ready=(25.0, 50.0, 75.0, 100.0), end=100.0, update=0.0)
    report = replay_report(the_job, run_fake(the_job, FakeNcclWorld(2, cuda), backend="nccl"))
    m = report.measured
    assert m.exposed_comm_ms <= max(bucket_ms(report.replay)) + 1e-9  # the last bucket's
    assert m.compute_ms == pytest.approx(100.0, abs=0.5)  # rescaled after the warm-up step
    assert report.replay.spin_drift_pct == pytest.approx(-20.0, abs=0.5)
    assert m.iteration_ms == pytest.approx(100.0, abs=0.5)
    from tracecli.pipeline.replay import drift_notice

    assert "spin clock ran -20.0% off its calibration" in drift_notice(report)


def test_baseline_starts_behind_a_spin_as_replay_buckets_do(monkeypatch):
    """Item 5: each collective costs the host 0.5 ms to launch; on an idle GPU a bare loop
    times that launch too, so the replay's overhead came out negative."""
    launch = lambda index, what: 0.5 if what == "launch" else 0.0  # noqa: E731
    cuda = install(monkeypatch, FakeCuda(2, host_cost=launch))
    the_job = job(baseline=True)
    report = replay_report(the_job, run_fake(the_job, FakeNcclWorld(2, cuda), backend="nccl"))
    for b, ms in zip(report.measured.buckets, bucket_ms(report.replay)):
        assert b.bare_ms == pytest.approx(ms, abs=1e-9)
        assert b.duration_ms == pytest.approx(ms, abs=1e-9)
        assert b.overhead_pct == pytest.approx(0.0, abs=1e-6)


def test_queued_calibration_samples_are_never_host_enqueue_gaps(monkeypatch):
    """Item 9: launching a collective costs the host 1 ms, so launching the queued round's
    four at once takes longer than the 2 ms the device idles first; samples the host could
    not keep queued are not queued samples."""
    launch = lambda index, what: 1.0 if what == "launch" else 0.0  # noqa: E731
    cuda = install(monkeypatch, FakeCuda(2, host_cost=launch))
    sweep = run_fake(CalibrationJob(SWEEP), FakeNcclWorld(2, cuda), backend="nccl")
    for p in sweep.points:
        assert p.times_ms and all(t == pytest.approx(transfer_ms("all_reduce:sum", p.bytes, False))
                                  for t in p.times_ms)
        assert p.queued_times_ms and all(
            t == pytest.approx(transfer_ms("all_reduce:sum", p.bytes, True))
            for t in p.queued_times_ms)


def test_the_lead_collective_reduces_initialised_values(monkeypatch):
    """Item 9: the 4-byte collective that queued sizes wait behind all-reduced whatever
    torch.empty left in memory (here NaN, as a debugging allocator leaves it)."""
    empty = torch.empty

    def nan_empty(*args, **kw):
        t = empty(*args, **kw)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    seen = []

    class Spy(FakeWorld):
        def exchange(self, rank, what, value, nbytes):
            if what == "all_reduce:sum" and nbytes == 4:
                seen.append(bool(torch.isfinite(value).all()))
            return super().exchange(rank, what, value, nbytes)

    monkeypatch.setattr(torch, "empty", nan_empty)
    run_fake(CalibrationJob(Sweep(4096, 8192, points=2, warmup=0, iters=2)), Spy(2))
    assert seen and all(seen)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("world", [86, 128, 4096])
def test_sums_are_exact_in_any_order(dtype, world):
    """Item 9: every rank's pattern sums exactly whatever order NCCL adds them in (each
    partial sum rounded to the dtype). In bfloat16 at 128 ranks the old pattern's totals
    reached 257, which bfloat16 cannot hold (a lost contribution of 1 there went unseen);
    from 136 ranks its sums came out wrong."""
    from tracecli.replay.buckets import BucketBuffer

    def buffer(rank=None):
        b = BucketBuffer(64 * 2, dtype, ALL_REDUCE, world, "cpu")
        if rank is not None:
            b.fill(rank)
        return b

    ranks = list(range(world))
    orders = [ranks, ranks[::-1], [r for pair in zip(ranks[::2], ranks[1::2]) for r in pair[::-1]]]
    if world > 256:
        orders = orders[:1]
    inputs = {r: buffer(r).input for r in ranks}
    exact = sum(inputs[r].double() for r in ranks)
    for order in orders:
        total = inputs[order[0]].clone()
        for r in order[1:]:
            total = total + inputs[r]  # rounded to the dtype at every step, as NCCL's ring does
        assert torch.equal(total.double(), exact), (dtype, world, order[:3])
        check = buffer()
        check.input.copy_(total)
        assert check.verify(), (dtype, world, order[:3])
    check.input[5] -= 1  # a lost contribution
    assert not check.verify()


def test_process_group_timeout_covers_a_step_longer_than_the_timeout(monkeypatch):
    """Item 2: NCCL's watchdog times each collective from its enqueue, and a step is
    enqueued at its start; a 120 s step under --timeout 30 must not be aborted."""
    import torch.distributed as dist

    from tracecli.replay import worker

    install(monkeypatch, FakeCuda(2))
    seen = {}

    class Reached(Exception):
        pass

    def init(backend, **kw):
        seen.update(kw, backend=backend)
        raise Reached

    monkeypatch.setattr(dist, "init_process_group", init)
    long = job(ready=(30e3, 60e3, 90e3, 120e3), end=120e3)
    with pytest.raises(Reached):
        worker.run_rank(0, 2, 0, "nccl", long, Ranks(2, "nccl", timeout_s=30))
    assert seen["backend"] == "nccl"
    assert seen["timeout"] >= datetime.timedelta(seconds=30 + 120)


def test_gpu_memory_is_checked_before_the_group_is_joined(monkeypatch):
    """Item 6: 2 GiB of gradients on a GPU with 1 GiB free is refused in one line naming
    the device and both figures, before NCCL is initialised."""
    import torch.distributed as dist

    from tracecli.replay import worker

    install(monkeypatch, FakeCuda(2, free=1 << 30, total=80 << 30))
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: pytest.fail("joined"))
    grads = tuple(Grad(f"g{i}", 512 << 20, "float32", 128 << 20, 1.0 + i, i) for i in range(4))
    big = ReplayJob(PlanInput(grads, 1.0, 10.0), "per-tensor", options_of("per-tensor"),
                    resolve_cost_model(2, "10gbe"), "10gbe")
    with pytest.raises(ReplayUnavailableError) as err:
        worker.run_rank(1, 2, 1, "nccl", big, Ranks(2, "nccl"))
    message = str(err.value)
    assert "\n" not in message and "cuda:1" in message and "1.0 GiB free" in message
    assert "2.0 GiB of buffers" in message


def test_a_rank_error_is_sent_before_the_group_is_destroyed(monkeypatch):
    """Item 9: destroy_process_group() can block on peers; a rank's error must already be
    on its way to the launcher."""
    import torch.distributed as dist

    from tracecli.replay import worker

    install(monkeypatch, FakeCuda(2))
    sent = []

    class Queue:
        def put(self, message):
            sent.append(message)

        def close(self):
            pass

        def join_thread(self):
            pass

    class Exited(BaseException):
        pass

    def exit_(code):
        raise Exited(code)

    def boom(*args, **kw):
        raise RuntimeError("boom")

    destroyed_after = []
    monkeypatch.setattr(worker, "local_store", lambda *a: (dist.HashStore(), None))
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: None)
    monkeypatch.setattr(dist, "destroy_process_group",
                        lambda *a, **k: destroyed_after.append(list(sent)))
    monkeypatch.setattr(worker, "rank_work", boom)
    monkeypatch.setattr(worker.os, "_exit", exit_)
    with pytest.raises(Exited):
        worker.spawn_main(1, 2, 1234, "nccl", job(), Ranks(2, "nccl"), Queue())
    assert destroyed_after, "the group was never destroyed"
    assert any(m[0] == "error" and "boom" in m[2] for m in destroyed_after[0])


def test_under_torchrun_nccl_needs_the_local_rank(monkeypatch):
    """Item 8: without LOCAL_RANK the device was RANK's: cuda:3 on a node of two GPUs."""
    from conftest import VGG, assert_error, run

    install(monkeypatch, FakeCuda(2))
    for key, value in {"RANK": "3", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "29999", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert_error(run("replay", VGG, "--backend", "nccl", "--network", "10gbe", "--iters", "1"),
                 "tracecli: ", "LOCAL_RANK")


@pytest.mark.parametrize("name", ["TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"])
def test_under_torchrun_blocking_wait_is_refused(monkeypatch, name):
    """Item 7: TORCH_NCCL_BLOCKING_WAIT=1 makes every wait() block the host, so no compute
    overlaps communication; torchrun hands its environment to the ranks, so refuse."""
    import torch.distributed as dist

    from conftest import VGG, assert_error, run

    install(monkeypatch, FakeCuda(1))
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: pytest.fail("joined"))
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "29999", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       name: "1"}.items():
        monkeypatch.setenv(key, value)
    assert_error(run("replay", VGG, "--backend", "nccl", "--network", "10gbe", "--iters", "1"),
                 "tracecli: ", name, "unset")


def test_under_torchrun_one_device_connection_is_warned_about(monkeypatch):
    """Item 7: CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron's containers) puts every stream on one
    hardware queue, which can serialise the spin and the collectives: say so."""
    import torch.distributed as dist

    from conftest import VGG, run

    class Reached(Exception):
        pass

    def init(*args, **kw):
        raise Reached("reached init")

    install(monkeypatch, FakeCuda(1))
    monkeypatch.setattr(dist, "init_process_group", init)
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "29999", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       "CUDA_DEVICE_MAX_CONNECTIONS": "1"}.items():
        monkeypatch.setenv(key, value)
    result = run("replay", VGG, "--backend", "nccl", "--network", "10gbe", "--iters", "1")
    assert "CUDA_DEVICE_MAX_CONNECTIONS=1" in result.stderr
    assert "reached init" in result.stderr  # a warning, not a refusal
