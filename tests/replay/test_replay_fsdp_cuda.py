"""Replay of FSDP plans on the GPU path (NCCL), on the fake ``torch.cuda`` and fake NCCL
group of ``tests/fake_cuda.py`` (virtual time: every figure exact).

Where the fake's collectives take exactly the cost model's times, the replay must measure
exactly the plan's schedule: each collective launched where FSDP issues it, started and
ended where the plan says, compute waiting for the all-gathers it needs, and the step's
compute as planned. Each process group has its own NCCL stream (as ProcessGroupNCCL keeps).
"""

from __future__ import annotations

import pytest

from conftest import FIXTURES

from tracecli.costs import resolve_cost_model
from tracecli.model import CollectiveKind
from tracecli.parsers import load
from tracecli.pipeline import ComputeRequest
from tracecli.pipeline.compute import inputs
from tracecli.planning import options_for
from tracecli.planning.fsdp.replay import replay_schedule
from tracecli.replay.jobs import ReplayJob
from tracecli.replay.report import replay_report

torch = pytest.importorskip("torch", reason="the fake backend computes with torch tensors")

from fake_cuda import FakeCuda, FakeNcclWorld, install  # noqa: E402

from tracecli.replay.fakecomm import run_fake  # noqa: E402

FSDP = FIXTURES / "fsdp"
KINDS = {"all_gather": CollectiveKind.ALL_GATHER, "reduce_scatter": CollectiveKind.REDUCE_SCATTER,
         "all_reduce:sum": CollectiveKind.ALL_REDUCE}
EXACT = 1e-4  # ms: a spin is whole cycles (1 ns at the fake clock), rounded down per span


def job_of(case: str, world: int, strategy: str, **knobs) -> ReplayJob:
    inp = inputs(load(str(FSDP / case / "rank0.json.gz")), ComputeRequest())[2]
    return ReplayJob(inp, strategy, options_for(strategy, knobs),
                     resolve_cost_model(world, "10gbe"), "10gbe", iters=2, warmup=1)


def model_durations(job: ReplayJob):
    """The fake's collective times: the job's cost model's, for FSDP's collectives on the
    whole world (the alignment all-reduce and the rest take 1 us)."""
    def duration(what, nbytes, queued):
        kind = KINDS.get(what)
        return 0.001 if kind is None or nbytes <= 4 else job.cost.time_ms(kind, nbytes, queued)
    return duration


@pytest.mark.parametrize("case,strategy,knobs", [
    ("fsdp2_default", "fsdp2", {}), ("fsdp2_explicit_prefetch", "fsdp2", {}),
    ("fsdp2_default", "fsdp2", {"fsdp_reshard_after_forward": "false"}),
    ("fsdp2_mixed_precision", "fsdp2", {}), ("fsdp1_backward_pre", "fsdp1", {}),
    ("fsdp1_backward_post", "fsdp1", {})])
def test_nccl_replay_measures_the_plans_schedule_exactly(monkeypatch, case, strategy, knobs):
    job = job_of(case, 2, strategy, **knobs)
    cuda = install(monkeypatch, FakeCuda(2, duration=model_durations(job)))
    run_ = run_fake(job, FakeNcclWorld(2, cuda), backend="nccl")
    assert run_.verified
    report = replay_report(job, run_)
    t = report.plan.timeline
    assert len(report.measured.buckets) == len(t.buckets) > 0
    for b, m in zip(t.buckets, report.measured.buckets):
        assert m.ready_ms == pytest.approx(b.ready_ms, abs=EXACT), b.index
        assert m.start_ms == pytest.approx(b.start_ms, abs=EXACT), b.index
        assert m.end_ms == pytest.approx(b.end_ms, abs=EXACT), b.index
    assert report.measured.compute_ms == pytest.approx(t.compute_ms, abs=EXACT)
    assert report.measured.iteration_ms == pytest.approx(t.iteration_ms, abs=EXACT)


def test_slower_all_gathers_hold_compute_back(monkeypatch):
    """All-gathers 1 ms slower each: the compute that needs them starts that much later,
    so the step grows, and compute as it ran stays the plan's."""
    job = job_of("fsdp2_default", 2, "fsdp2")
    base = model_durations(job)
    slow = lambda what, n, q: base(what, n, q) + (1.0 if what == "all_gather" else 0.0)  # noqa: E731
    cuda = install(monkeypatch, FakeCuda(2, duration=slow))
    report = replay_report(job, run_fake(job, FakeNcclWorld(2, cuda), backend="nccl"))
    t = report.plan.timeline
    assert report.measured.compute_ms == pytest.approx(t.compute_ms, abs=EXACT)
    # the forward waits for the three forward all-gathers back to back, the backward
    # re-gathers each hold their unit's backward
    assert report.measured.iteration_ms >= t.iteration_ms + 3.0 - EXACT
    assert report.measured.exposed_comm_ms >= 3.0 - EXACT


@pytest.mark.parametrize("case", ["hsdp_2x2", "fsdp2_reshard_int"])
def test_nccl_replay_on_the_mesh_groups(monkeypatch, case):
    job = job_of(case, 4, "fsdp2")
    cuda = install(monkeypatch, FakeCuda(4))
    run_ = run_fake(job, FakeNcclWorld(4, cuda), backend="nccl")
    assert run_.verified
    sched = replay_schedule(run_.plan)
    families = sorted({c.family for c in sched.comms})
    for device in cuda.devices:  # one NCCL stream a group this rank is in, beside the default
        streams = [s.name for s in cuda.side_streams(device) if s.name.startswith("nccl")]
        assert len(streams) == len(sched.families())
    assert families != ["shard"]
    for rank in run_.ranks:
        for it in rank.iterations:
            for j, c in enumerate(sched.comms):
                assert it.end_ms[j] >= it.start_ms[j] >= it.launch_ms[j] - EXACT
                if c.follows is not None:
                    assert it.start_ms[j] >= it.end_ms[c.follows] - EXACT


def test_a_wrong_sum_is_caught_on_nccl(monkeypatch):
    job = job_of("hsdp_2x2", 4, "fsdp2")
    cuda = install(monkeypatch, FakeCuda(4))
    assert not run_fake(job, FakeNcclWorld(4, cuda, wrong_sum_rank=2), backend="nccl").verified


@pytest.mark.slow
@pytest.mark.parametrize("case,ranks", [("fsdp2_default", 2), ("hsdp_2x2", 4)])
def test_spawned_nccl_ranks_replay_an_fsdp_plan(case, ranks):
    """The launcher's NCCL path end to end: rank processes on fake GPUs, each FSDP channel's
    subgroups made with ``new_group(backend="nccl")`` (a stream of their own each)."""
    import json

    from test_cuda_processes import env_with, tracecli

    out = tracecli("replay", FSDP / case / "rank0.json.gz", "--strategy", "fsdp2",
                   "--backend", "nccl", "--gpus", ranks, "--network", "10gbe", "--iters", 2,
                   "--warmup", 1, "--json", env=env_with({"devices": ranks}), timeout=240)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["replay"]["backend"] == "nccl" and doc["replay"]["ranks"] == ranks
    assert doc["replay"]["verified"] is True
    assert len(doc["measured"]["buckets"]) == len(doc["buckets"]) > 0
