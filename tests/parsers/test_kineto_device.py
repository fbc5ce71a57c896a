"""Device time on GPU traces (issue 25 item 0), on hand-made events whose answers are the
test's own: a host that launches kernels far ahead of the device, a collective that runs
when its gradients are done, a device step annotation, and a trace with no device at all."""

from __future__ import annotations

import pytest

from tracecli.parsers.kineto_device import DeviceClock, step_clock
from tracecli.parsers.kineto_events import Activity, KinetoEvents


def events(host_ahead_us: float = 0.0) -> KinetoEvents:
    """Three compute kernels launched at host 10, 20, 30 us, each 10 us long, running back to
    back on the device from 100 us (plus ``host_ahead_us``); an NCCL kernel launched at 25."""
    ev = KinetoEvents()
    for corr, (launch, start) in enumerate([(10.0, 100.0), (20.0, 110.0), (30.0, 120.0)]):
        ev.launches[corr] = (1, launch)
        ev.device.append(Activity(start + host_ahead_us, start + host_ahead_us + 10.0, corr,
                                  False, True))
    ev.launches[9] = (1, 25.0)
    ev.device.append(Activity(112.0 + host_ahead_us, 140.0 + host_ahead_us, 9, True, True))
    return ev


def test_a_host_time_is_when_the_device_had_done_what_was_launched_by_then():
    clock = DeviceClock(events())
    assert clock.at(5.0) is None  # nothing launched yet
    assert clock.at(10.0) == 110.0 and clock.at(19.0) == 110.0
    assert clock.at(25.0) == 120.0  # the collective launched then is not compute
    assert clock.at(1000.0) == 130.0


def test_the_step_is_the_device_s_and_shifting_the_device_shifts_nothing_but_its_origin():
    for ahead in (0.0, 37_000.0):
        clock = step_clock(DeviceClock(events(ahead)), "ProfilerStep#1", 0.0, 50.0)
        assert clock.on_device and (clock.origin, clock.end) == (100.0 + ahead, 140.0 + ahead)
        assert clock.span_ms(15.0, 20.0) == pytest.approx((0.01, 0.02))  # done by 110 .. by 130
        assert clock.recorded_ms(112.0 + ahead) == pytest.approx(0.012)
        assert [x for span in clock.compute_ms() for x in span] == pytest.approx([0.0, 0.01, 0.01, 0.02, 0.02, 0.03])


def test_a_device_step_annotation_wins():
    ev = events()
    ev.device_steps.append(("ProfilerStep#1", 90.0, 150.0))
    clock = step_clock(DeviceClock(ev), "ProfilerStep#1", 0.0, 50.0)
    assert (clock.origin, clock.end) == (90.0, 150.0)


def test_without_device_activity_host_time_is_kept():
    clock = step_clock(DeviceClock(KinetoEvents()), "ProfilerStep#1", 1000.0, 2000.0)
    assert not clock.on_device and clock.ms(1500.0) == 0.5 and clock.compute_ms() is None
    clock = step_clock(DeviceClock(events()), "ProfilerStep#2", 500.0, 600.0)  # no work there
    assert not clock.on_device
