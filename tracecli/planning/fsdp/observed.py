"""``--strategy observed`` on an FSDP run: every collective FSDP issued in the traced step,
in issue order, with its unit, phase, unsharded size and dtype, and the times the run
measured. Nothing is predicted; totals follow the schedule's definitions (DESIGN 4.3), so
the as-run plan compares with the strategies' predictions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ...costs import CostModel
from ...errors import PlanError
from ...model import DTYPE_BYTES
from ..base import PlanInput
from ..plan import BucketPlan, settings_for
from ..schedule import CommTime, recorded
from ..spec import NoOptions
from ..timeline import BucketTiming, timeline_of
from .details import Details, channel_of
from .model import FsdpInput

__all__ = ["fsdp_as_run_plan"]

AS_RUN = "observed"


def fsdp_as_run_plan(inp: PlanInput, cost: CostModel, notes: Sequence[str] = ()) -> BucketPlan:
    """The as-run plan of ``inp``'s FSDP run, measured."""
    f: FsdpInput = inp.fsdp
    if not f.comms:
        raise PlanError("the FSDP run issued no collective in the traced step")
    if any(c.start_ms is None or c.end_ms is None for c in f.comms):
        raise PlanError("the trace does not record when FSDP's collectives ran; profile with "
                        "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    members = {u.name: u.gradients for u in f.units}
    timings = []
    for k, c in enumerate(f.comms):
        dtype = c.dtype or "float32"
        timings.append(BucketTiming(
            k, members.get(c.unit, ()), c.elements * DTYPE_BYTES.get(dtype, 4), dtype,
            c.launch_ms, c.start_ms, c.end_ms, c.kind, c.phase, c.unit, c.elements,
            channel_of(c.kind), c.group_size))
    times = recorded(inp.backward_end_ms, [CommTime(t.ready_ms, t.start_ms, t.end_ms, False)
                                           for t in timings], inp.update_ms)
    timeline = timeline_of(tuple(timings), inp.forward_ms, inp.backward_end_ms, inp.update_ms,
                           times)
    details = Details.of_run(f)
    plan = BucketPlan(AS_RUN, NoOptions(), cost, inp, timeline, times.compute_ms, {},
                      tuple(notes) + f.notes, measured=True, fsdp=details)
    return replace(plan, settings=settings_for(plan))
