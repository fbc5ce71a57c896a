"""Replay of FSDP plans (issue 27 item 4): FSDP's collectives in its schedule on channels and
process groups of their own, compute waiting for the collectives it needs, every buffer
verified on its group.

The schedule's logic runs on the in-process fake backend (ranks as threads, a delay in
every all-gather so that waiting shows); real gloo ranks replay the fixtures through the
CLI (slow). Timing checks are one-sided (a loaded machine only makes things later).
"""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, assert_error, run

from tracecli.costs import resolve_cost_model
from tracecli.model import CollectiveKind
from tracecli.parsers import load
from tracecli.pipeline import ComputeRequest
from tracecli.pipeline.compute import inputs
from tracecli.planning import options_for
from tracecli.planning.fsdp.replay import rank_groups, replay_bytes, replay_schedule
from tracecli.replay.jobs import ReplayJob
from tracecli.replay.report import replay_report

torch = pytest.importorskip("torch", reason="the fake backend computes with torch tensors")

from tracecli.replay.fakecomm import FakeWorld, run_fake  # noqa: E402

FSDP = FIXTURES / "fsdp"
EPS = 1e-6
GATHER_MS = 3.0


def job_of(case: str, world: int, strategy: str = "fsdp2", **knobs) -> ReplayJob:
    trace = load(str(FSDP / case / "rank0.json.gz"))
    inp = inputs(trace, ComputeRequest())[2]
    return ReplayJob(inp, strategy, options_for(strategy, knobs),
                     resolve_cost_model(world, "10gbe"), "10gbe", iters=2, warmup=1)


def slow_gathers(rank, what, nbytes):
    return GATHER_MS if what == "all_gather" else 0.0


@pytest.mark.parametrize("case,world,strategy", [
    ("fsdp2_default", 2, "fsdp2"), ("hsdp_2x2", 4, "fsdp2"), ("fsdp2_reshard_int", 4, "fsdp2"),
    ("fsdp2_explicit_prefetch", 2, "fsdp2"), ("fsdp1_backward_pre", 2, "fsdp1")])
def test_fsdp_schedule_replayed_in_order_with_compute_waiting(case, world, strategy):
    job = job_of(case, world, strategy)
    run_ = run_fake(job, FakeWorld(world, delay=slow_gathers))
    plan = run_.plan
    sched = replay_schedule(plan)
    assert run_.verified
    assert len(run_.buffers) == len(plan.timeline.buckets) == len(sched.comms)
    assert [b.collective for b in run_.buffers] == [c.kind for c in sched.comms]
    # each collective's span count: its release comes after the spans before it, and each
    # of those spans waited for the collectives it needs
    needs = [set() for _ in sched.comms]
    for j, c in enumerate(sched.comms):
        for k in range(min(c.after, len(sched.waits))):
            needs[j].update(sched.waits[k])
    for rank in run_.ranks:
        for it in rank.iterations:
            for j, c in enumerate(sched.comms):
                assert it.start_ms[j] >= it.launch_ms[j] - EPS
                assert it.end_ms[j] >= it.start_ms[j]
                for w in needs[j]:  # compute waited for w before the point j is issued at
                    assert it.launch_ms[j] >= it.end_ms[w] - EPS, (j, w)
                if c.follows is not None:
                    assert it.start_ms[j] >= it.end_ms[c.follows] - EPS
            for channel in {c.channel for c in sched.comms}:  # one at a time, in issue order
                mine = [j for j, c in enumerate(sched.comms) if c.channel == channel]
                for a, b in zip(mine, mine[1:]):
                    assert it.start_ms[b] >= it.end_ms[a] - EPS
            gathers = sum(c.kind is CollectiveKind.ALL_GATHER for c in sched.comms)
            assert it.iteration_ms >= gathers * GATHER_MS  # one channel, none skipped
    report = replay_report(job, run_)
    doc = report.to_json()
    assert [b["unit"] for b in doc["buckets"]] == [c.unit for c in plan.timeline.buckets]
    assert all("measured" in b for b in doc["buckets"])
    assert report.measured.compute_ms > 0 and report.measured.exposed_comm_ms >= 0


def test_groups_follow_the_mesh():
    job = job_of("hsdp_2x2", 4)
    sched = replay_schedule(job.plan(job.cost))
    assert (sched.replicate, sched.shard) == (2, 2)
    families = {c.family for c in sched.comms}
    assert families == {"shard", "replicate"}
    assert rank_groups("replicate", 4, 2, 2) == [[0, 2], [1, 3]]
    job = job_of("fsdp2_reshard_int", 4)
    sched = replay_schedule(job.plan(job.cost))
    backward = [c for c in sched.comms if c.kind is CollectiveKind.ALL_GATHER
                and c.family != "shard"]
    assert backward and all(c.family == "post:2" and c.group == 2 for c in backward)


def test_a_wrong_shard_is_caught():
    """HSDP's all-reduce over the replicate group: one rank's sum off by one fails the run."""
    run_ = run_fake(job_of("hsdp_2x2", 4), FakeWorld(4, wrong_sum_rank=3))
    assert not run_.verified


def test_fsdp_replay_memory_is_its_collectives():
    job = job_of("fsdp2_default", 2)
    sched = replay_schedule(job.plan(job.cost))
    # every collective: the whole padded tensor and one rank's share, float32
    want = sum((c.elements + c.elements // c.group) * 4 for c in sched.comms)
    assert replay_bytes(job.inp, job.options, 2) == want


def test_observed_and_plan_files_say_how_to_replay(tmp_path):
    trace = FSDP / "fsdp2_default" / "rank0.json.gz"
    assert_error(run("replay", trace, "--strategy", "observed", "--dry-run"), str(trace),
                 "--strategy fsdp2")
    plan = tmp_path / "plan.json"
    assert run("plan-buckets", trace, "--strategy", "fsdp2", "--out", plan).exit_code == 0
    assert_error(run("replay", "--plan", plan, "--dry-run"), f"{plan}:1:",
                 "FSDP plan", "--strategy fsdp2")


@pytest.mark.slow
@pytest.mark.parametrize("case,ranks", [("fsdp2_default", 2), ("fsdp1_backward_post", 2)])
def test_fsdp_replay_on_real_gloo_ranks(case, ranks):
    trace = FSDP / case / "rank0.json.gz"
    strategy = "fsdp1" if case.startswith("fsdp1") else "fsdp2"
    result = run("replay", trace, "--strategy", strategy, "--gpus", ranks, "--backend", "gloo",
                 "--iters", 2, "--warmup", 1, "--network", "10gbe", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["replay"]["verified"] is True and doc["replay"]["ranks"] == ranks
    record = json.loads((FSDP / case / "record.json").read_text())
    torch_did = [(e["kind"], e["phase"], e["elements"], e["dtype"])
                 for e in record["collectives"]["0"] if e["step"] == 3]
    assert [(b["collective"], b["phase"], b["elements"], b["dtype"])
            for b in doc["buckets"]] == torch_did  # the schedule replayed is torch's
    assert len(doc["measured"]["buckets"]) == len(doc["buckets"])
    for b in doc["buckets"]:
        m = b["measured"]
        assert m["end_ms"] >= m["start_ms"] >= m["ready_ms"] - EPS >= -EPS
