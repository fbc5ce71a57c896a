"""The launcher's verdict (replay/watch.py) on hand-written histories of ranks: when it
stops waiting, and which rank it names. tests/replay/test_cuda_processes.py and test_replay.py run
the same through real processes."""

from __future__ import annotations

import signal

import pytest

from tracecli.errors import ReplayError
from tracecli.replay.watch import Watch

TIMEOUT = 3.0


def watch(world: int = 2) -> Watch:
    return Watch(world, TIMEOUT, stall_s=20.0, now=0.0)


def verdict(w: Watch, alive=()) -> str:
    with pytest.raises(ReplayError) as err:
        w.verdict(list(alive))
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_rank_behind_for_longer_than_the_timeout_is_hung():
    w = watch()
    w.heard(("beat", 0, 1), 1.0)
    w.heard(("beat", 1, 1), 1.0)
    w.heard(("beat", 0, 2), 2.0)  # rank 1 never begins step 2
    assert not w.done(2.0 + TIMEOUT - 0.1, quiet=True)
    assert w.done(2.0 + TIMEOUT + 0.1, quiet=True)
    message = verdict(w, alive=[0, 1])
    assert message.startswith("rank 1 did not respond for 3 s (hung?)")
    assert "rank 0 waited for it in step 2" in message and "all 2 ranks stopped" in message


def test_nccl_watchdog_abort_of_a_waiting_rank_is_blamed_on_the_rank_it_waited_for():
    """Issue 28 item 3: the healthy rank dies of SIGABRT; the hung one is at fault."""
    w = watch()
    w.heard(("beat", 0, 2), 1.0)
    w.heard(("beat", 1, 1), 1.0)
    w.exited(0, -signal.SIGABRT, 1.5)
    assert w.done(2.1, quiet=True)
    message = verdict(w, alive=[1])
    assert message.startswith("rank 1 did not respond") and "SIGABRT" not in message


def test_a_sigabrt_with_no_rank_behind_says_it_is_nccls_watchdog():
    w = watch()
    w.heard(("beat", 0, 2), 1.0)
    w.heard(("beat", 1, 2), 1.0)
    w.exited(1, -signal.SIGABRT, 2.0)
    assert w.done(2.6, quiet=True)
    assert verdict(w, alive=[0]).startswith("rank 1 was killed by SIGABRT (NCCL's watchdog")


def test_a_silent_death_comes_first_then_a_rank_own_error():
    w = watch(3)
    w.heard(("error", 0, "RuntimeError: Connection reset by peer", False), 1.0)
    w.heard(("error", 2, "RuntimeError: planted failure", False), 1.0)
    w.exited(1, 3, 1.0)
    assert verdict(w).startswith("rank 1 exited with status 3; all 3 ranks stopped")
    w = watch(3)
    w.heard(("error", 0, "RuntimeError: Connection reset by peer", False), 1.0)
    w.heard(("error", 2, "RuntimeError: planted failure", False), 1.0)
    assert verdict(w).startswith("rank 2 failed: RuntimeError: planted failure")


def test_a_users_error_in_a_rank_is_its_own_message():
    w = watch()
    w.heard(("error", 1, "this replay needs 1.5 GiB of GPU memory on cuda:1 (rank 1): ...", True),
            1.0)
    assert verdict(w) == ("rank 1: this replay needs 1.5 GiB of GPU memory on cuda:1 (rank 1): "
                          "...; all 2 ranks stopped")


def test_when_no_rank_begins_a_step_every_rank_is_stopped_as_stalled():
    w = watch()
    assert not w.done(100.0, quiet=True)  # nothing began yet: start-up is the store's to time
    w.heard(("beat", 0, 1), 100.0)
    w.heard(("beat", 1, 1), 100.0)
    assert not w.done(119.0, quiet=True)
    assert w.done(121.0, quiet=True)
    assert verdict(w, alive=[0, 1]).startswith("no rank began a step for 20 s")


def test_finished_ranks_give_rank_0s_result():
    w = watch()
    w.heard(("beat", 0, 3), 1.0)
    w.heard(("beat", 1, 3), 1.0)
    w.heard(("result", {"ok": True}), 2.0)
    w.exited(0, 0, 2.0)
    assert not w.done(2.0, quiet=False)
    w.exited(1, 0, 2.1)
    assert w.done(2.1, quiet=True)
    assert w.verdict([]) == {"ok": True}
