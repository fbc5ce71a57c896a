"""The optimal plan: exact (brute force), never beaten, fast."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planning_curves import brute_force
from tracecli.planning import predicted
from tracecli.planning.base import Grad, Grouping
from tracecli.costs import AlphaBeta as CostModel
from tracecli.model import CollectiveKind
from tracecli.planning.optimal import optimal_partition
from tracecli.planning.plan import PlanInput, make_plan
from tracecli.planning.timeline import lower_bound, simulate


@st.composite
def instances(draw, max_n=9):
    n = draw(st.integers(1, max_n))
    gaps = draw(st.lists(st.floats(0, 5, allow_nan=False), min_size=n, max_size=n))
    ready, clock = [], draw(st.floats(0, 3, allow_nan=False))
    for gap in gaps:
        clock += gap
        ready.append(clock)
    sizes = draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n))
    grads = tuple(Grad(f"g{i}", s, "float32", s // 4, r, i) for i, (s, r) in enumerate(zip(sizes, ready)))
    cost = CostModel("t", alpha_us=draw(st.floats(0, 500, allow_nan=False)),
                     bandwidth_gbps=draw(st.floats(0.001, 10, allow_nan=False)),
                     gpus=draw(st.integers(1, 16)), algorithm=draw(st.sampled_from(["ring", "tree"])),
                     launch_us=draw(st.floats(0, 200, allow_nan=False)))
    backward_end = ready[-1] + draw(st.floats(0, 5, allow_nan=False))
    return grads, cost, backward_end


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


@settings(max_examples=400, deadline=None)
@given(instances())
def test_optimal_equals_brute_force(instance):
    grads, cost, backward_end = instance
    buckets = optimal_partition([g.ready_ms for g in grads], [g.nbytes for g in grads],
                                *cost.linear(CollectiveKind.ALL_REDUCE))
    got = simulate(grads, Grouping(buckets), cost, 0.0, backward_end).iteration_ms
    assert close(got, brute_force(grads, cost, backward_end))


@settings(max_examples=300, deadline=None)
@given(instances(), st.integers(1, 8000))
def test_optimal_with_cap_equals_brute_force(instance, cap):
    grads, cost, backward_end = instance
    buckets = optimal_partition([g.ready_ms for g in grads], [g.nbytes for g in grads],
                                *cost.linear(CollectiveKind.ALL_REDUCE), cap)
    assert all(len(b) == 1 or sum(grads[i].nbytes for i in b) <= cap for b in buckets)
    got = simulate(grads, Grouping(buckets), cost, 0.0, backward_end).iteration_ms
    assert close(got, brute_force(grads, cost, backward_end, cap))


@settings(max_examples=200, deadline=None)
@given(instances(max_n=30), st.integers(1, 20000), st.sampled_from([0.5, 1.0, 3.0]))
def test_optimal_never_slower_than_any_strategy(instance, cap, cycle):
    grads, cost, backward_end = instance
    inp = PlanInput(grads, 0.0, backward_end)
    best = make_plan(inp, "optimal", {}, cost).timeline.iteration_ms
    bound = lower_bound(grads, cost, backward_end)
    assert best >= bound - 1e-9
    for name in predicted(inp):  # FSDP's strategies plan FSDP runs only
        opts = dict(max_bytes=cap, cycle_ms=cycle, agg_small_grads_max_bytes=cap)
        plan = make_plan(inp, name, opts, cost)
        t = plan.timeline
        assert t.iteration_ms >= best - 1e-9 * max(1.0, best), name
        assert t.iteration_ms >= bound - 1e-9, name
        # every gradient in exactly one bucket, readiness order inside each bucket
        members = [i for b in t.buckets for i in b.members]
        assert sorted(members) == list(range(len(grads))), name
        assert all(list(b.members) == sorted(b.members) for b in t.buckets), name
        # buckets start in bucket order and never before their gradients are ready
        starts = [b.start_ms for b in t.buckets]
        assert starts == sorted(starts)
        assert all(b.start_ms >= b.ready_ms >= max(grads[i].ready_ms for i in b.members)
                   for b in t.buckets)
        # the cap is passed only as each strategy allows
        for b in t.buckets:
            if name in ("horovod",) and len(b.members) > 1:
                assert b.nbytes <= cap
            if name == "size":
                assert b.nbytes - grads[b.members[-1]].nbytes < cap


def test_optimal_runs_in_linear_time_on_large_inputs():
    n = 200_000
    ready = [i * 0.001 for i in range(n)]
    sizes = [(i * 7919) % 100_000 + 1 for i in range(n)]
    buckets = optimal_partition(ready, sizes, latency_ms=0.05, ms_per_byte=1e-6, cap=10_000_000)
    assert sum(len(b) for b in buckets) == n
