"""The one schedule model (tracecli.planning.schedule): DDP's one channel as the timeline always
computed it, several channels, compute that waits for a collective, and a schedule that can
never run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tracecli.errors import PlanError
from tracecli.model import CollectiveKind
from tracecli.planning.schedule import Comm, Span, Step, channel_starts, issue_times, recorded, run

AR, AG, RS = CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER


def one_channel(ready, durations, compute_end, update):
    """DESIGN 4.3 written out for one channel: bucket k starts at max(ready_k, end of k-1)."""
    free, out = 0.0, []
    for k, (r, d) in enumerate(zip(ready, durations)):
        start = max(r, free)
        queued = k > 0 and r <= free
        out.append((r, start, start + d, queued))
        free = start + d
    iteration = max(compute_end, free) + update
    return out, iteration, iteration - (compute_end + update)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 10)), max_size=12),
       st.floats(0, 120), st.floats(0, 5))
def test_one_channel_is_designs_formula(buckets, compute_end, update):
    ready = sorted(r for r, _ in buckets)
    durations = [d for _, d in buckets]
    comms = tuple(Comm(AR, 1, ready_ms=r) for r in ready)
    queued_seen = []

    def duration(comm, queued):
        queued_seen.append(queued)
        return durations[len(queued_seen) - 1]

    times = run(Step((Span(compute_end),), comms, update), duration)
    want, iteration, exposed = one_channel(ready, durations, compute_end, update)
    assert [tuple(t) for t in times.comms] == want
    assert queued_seen == [q for *_, q in want]
    assert times.iteration_ms == iteration and times.exposed_ms == exposed


def test_channels_run_side_by_side_and_compute_waits_for_its_all_gather():
    # unit 0's forward waits for its all-gather; unit 1's all-gather is prefetched behind it
    # on the same channel; backward's reduce-scatters go on their own channel
    step = Step((Span(3.0, waits=(0,)), Span(3.0, waits=(1,)), Span(4.0), Span(4.0)),
                (Comm(AG, 8, channel="ag", after=0), Comm(AG, 8, channel="ag", after=0),
                 Comm(RS, 8, channel="rs", after=3), Comm(RS, 8, channel="rs", after=4)), 1.0)
    t = run(step, lambda comm, queued: 2.0)
    assert [(c.start_ms, c.end_ms) for c in t.comms] == [(0, 2), (2, 4), (12, 14), (16, 18)]
    assert t.span_end_ms == (5.0, 8.0, 12.0, 16.0)  # the first span waited 2 ms
    assert [c.queued for c in t.comms] == [False, True, False, False]
    assert t.iteration_ms == 19.0 and t.compute_ms == 15.0 and t.exposed_ms == 4.0


def test_a_span_that_waits_for_a_collective_it_must_first_make_ready_is_refused():
    step = Step((Span(1.0), Span(1.0, waits=(0,))), (Comm(AG, 8, after=2),))
    with pytest.raises(PlanError, match="can never run"):
        run(step, lambda comm, queued: 1.0)


def test_measured_step_totals_follow_the_same_definitions():
    from tracecli.planning.schedule import CommTime

    t = recorded(10.0, [CommTime(2.0, 2.0, 6.0, False), CommTime(6.0, 9.0, 13.0, True)], 0.5)
    assert (t.iteration_ms, t.compute_ms, t.exposed_ms, t.comm_ms) == (13.5, 10.5, 3.0, 8.0)


def test_replay_helpers():
    assert issue_times([3.0, 1.0, 4.0]) == (3.0, 3.0, 4.0)
    assert channel_starts([0.0, 1.0], [5.0, 6.0]) == (0.0, 5.0)
