"""Planning from a whole run: the lowest rank's trace, its collectives timed by transfer.

``plan-buckets RUN`` plans the lowest rank's step (every rank of a data-parallel run
computes the same gradients) with the cost model fitted to the transfer times across ranks
(:func:`tracecli.run.transfer.without_waits`), not to a rank's recorded durations, which
include waiting for the slowest rank; it says the fit's quality both ways. ``--compare``
shows the run as measured, the run with every rank on time (no rank waits for another:
each collective takes its transfer time, those queued behind a wait move up, and the
backward pass, which DDP ends when its last all-reduce does, ends that much sooner) and
every strategy.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import NamedTuple, Optional, Union

from ..analysis.observed import measured_allreduces
from ..costs import CostModel, fit_ring
from ..errors import CalibrationError, CostModelError, PlanError
from ..model import Trace
from .compute import ComputeRequest
from .cost import CostRequest
from .observed import as_run, cost_for
from .planned import Planned
from .trace import compare_trace, plan_trace
from ..planning import OptionValues
from ..jsonfile import finite_number
from ..model import DTYPE_BYTES
from ..planning.observed import RunBucket, as_run_plan, as_run_prediction
from ..planning.plan import BucketPlan, CompareRow
from ..planning.planfile import load_plan_file
from ..run import RunReport
from ..run.diff import Change, run_buckets
from ..run.transfer import without_waits

__all__ = ["run_trace", "plan_run", "compare_run", "fit_quality", "AdviceCheck", "check_advice"]

MEASURED = "as run (measured)"
CLEAN = "as run, every rank on time"


def fit_quality(trace: Trace) -> Optional[str]:
    """``R² .., MAPE ..%`` of the alpha-beta line fitted to the trace's gradient
    all-reduces, or ``None`` where there is no fit."""
    points, ranks, _ = measured_allreduces(trace)
    if not points or not ranks or ranks < 2 or len({n for n, _ in points}) < 2:
        return None
    try:
        fit = fit_ring(points, ranks)
    except CalibrationError:
        return None
    return f"R²={fit.r2:.2f}, MAPE {fit.mape_pct:.0f}%"


def _complete(report: RunReport) -> None:
    """A run with ranks missing cannot be planned: its transfer times hold the missing
    ranks' lateness (the waits for them are not seen), so a model fitted to them is slow."""
    missing = report.missing_ranks
    if not missing or len(report.run.ranks) < 2:
        return
    shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
    late = next((s for s in report.steps if s.straggler_missing), None)
    cost = (f" (in {late.label} rank {late.straggler} kept the others waiting {late.lost_ms:.1f} ms)"
            if late else "")
    first = report.run.ranks[0].path
    raise PlanError(f"the run has no trace of rank{'s' if len(missing) > 1 else ''} {shown} "
                    f"of {report.run.world_size}: the present ranks' transfer times hold the "
                    f"waits for {'them' if len(missing) > 1 else 'it'}{cost}, so a cost model "
                    "fitted to them would be too slow; add the missing traces to the run, or "
                    f"plan one rank's trace as it recorded it: tracecli plan-buckets {first}",
                    path=report.run.given)


def run_trace(trace: Trace, report: RunReport) -> tuple[Trace, list[str]]:
    """The lowest rank's ``trace`` with transfer times, and what to say about it."""
    _complete(report)
    n = len(report.run.ranks)
    if n < 2:
        return trace, ["the run has one rank: its collectives' recorded times (waits "
                       "included) are all there is to fit the cost model to"]
    clean, changed, kept = without_waits(trace, report)
    before, after = fit_quality(trace), fit_quality(clean)
    said = [f"planning rank {report.run.ranks[0].rank}'s step with the collectives' transfer "
            f"times across the run's {n} ranks ({changed} collectives; waits for late ranks "
            "removed)"]
    if before or after:
        said.append(f"cost model fitted to transfer times: {after or 'no fit'} (each rank's "
                    f"recorded times, waits included: {before or 'no fit'})")
    if kept:
        said.append(f"{kept} collectives not matched on every rank keep their recorded times")
    late = [st for st in report.steps if st.straggler is not None]
    if late:
        shown = ", ".join(f"{st.label} (rank {st.straggler}, {st.lost_ms:.1f} ms lost)"
                          for st in late[:4]) + (", ..." if len(late) > 4 else "")
        step = trace.step.label if trace.step is not None else "the traced step"
        said.append(f"stragglers in {shown}; this plans {step} (pass --step K for another)")
    return clean, said


# pipeline.trace_cost explains a poor fit by the waits in recorded times; fitted to
# transfer times, that explanation no longer holds
_WAITS = "recorded times include waiting for the slowest rank, so predictions are rough"
_NO_WAITS = ("transfer times scatter around the latency-bandwidth line (a loaded host, or "
             "the transport's own variation), so predictions are rough")


def _notices(said: list[str], planned: Planned, multi: bool) -> tuple[str, ...]:
    theirs = tuple(n.replace(_WAITS, _NO_WAITS) if multi else n for n in planned.notices)
    return tuple(said) + theirs


def plan_run(trace: Trace, report: RunReport, name: str, options: OptionValues,
             compute: ComputeRequest, cost: Union[CostModel, CostRequest]) -> Planned:
    clean, said = run_trace(trace, report)
    planned = plan_trace(clean, name, options, compute, cost)
    return replace(planned, notices=_notices(said, planned, len(report.run.ranks) > 1))


def _on_time(plan: BucketPlan, waited_ms: float) -> BucketPlan:
    """The as-run plan (collectives already at their transfer times) with the step's
    backward ending ``waited_ms`` sooner (the rank's waits in the step, overlaps once): a
    rank's backward ends when its last all-reduce does (DDP waits for them), so it held
    its waits for late ranks too."""
    lost_ms = waited_ms
    if lost_ms <= 0:
        return plan
    buckets = [RunBucket(b.members, b.nbytes, b.dtype, b.ready_ms, b.start_ms, b.end_ms)
               for b in plan.buckets]
    ready = max((b.ready_ms for b in buckets), default=plan.inp.forward_ms)
    inp = replace(plan.inp, backward_end_ms=max(ready, plan.inp.backward_end_ms - lost_ms))
    return as_run_plan(inp, buckets, plan.cost, plan.notes)


def compare_run(trace: Trace, report: RunReport, options: OptionValues,
                compute: ComputeRequest, cost: Union[CostModel, CostRequest]) -> Planned:
    """Every strategy under the transfer-fitted model, the run with every rank on time and
    the run as measured (the lowest rank's own recorded times)."""
    clean, said = run_trace(trace, report)
    planned = compare_trace(clean, options, compute, cost)
    step = trace.step.index if trace.step is not None else None
    low = report.run.ranks[0].rank
    waited = next((st.ranks[low].wait_ms for st in report.steps if st.step == step), 0.0)
    rows = [CompareRow(CLEAN, _on_time(r.plan, waited)) if r.label == MEASURED else r
            for r in planned.rows]
    if len(report.run.ranks) > 1 and any(r.label == CLEAN for r in rows):
        try:
            measured = as_run(trace, compute, planned.cost).plan
            if measured is not None:
                rows.insert(0, CompareRow(MEASURED, measured))
        except (PlanError, CostModelError) as exc:
            said.append(f"no as-measured row: {exc.message}")
    return replace(planned, rows=rows,
                   notices=_notices(said, planned, len(report.run.ranks) > 1))


class AdviceCheck(NamedTuple):
    """Did the advice work: what tracecli predicted for the plan a run was made with,
    beside what the run measured."""

    plan: str  # the plan file RUN_B was made with
    settings: str  # what it said to set
    predicted_before_ms: float  # RUN_A's own buckets, predicted under the plan's model
    predicted_after_ms: float  # the plan's step, as the plan file predicted it
    measured: Change  # the step time, RUN_A against RUN_B (medians over steps)
    applied: Optional[bool]  # RUN_B's buckets are the plan's (None: the run does not say)
    buckets_run: tuple[int, ...]  # RUN_B's bucket bytes
    buckets_plan: tuple[int, ...]
    notes: tuple[str, ...]

    @property
    def predicted_gain_ms(self) -> float:
        return self.predicted_before_ms - self.predicted_after_ms

    @property
    def verdict(self) -> str:
        m = self.measured
        if self.applied is False:
            return "not applied: the run's buckets are not the plan's"
        if m.verdict in ("within noise", "not measured"):
            return "no measurable change: the step moved within the runs' noise"
        worked = (m.verdict == "faster") == (self.predicted_gain_ms > 0)
        return "the advice worked" if worked else "the advice did not work"


def _plan_doc(path: str) -> tuple[dict, tuple[int, ...]]:
    plan = load_plan_file(path)
    iteration = (plan.doc.get("predicted") or {}).get("iteration_ms")
    if not finite_number(iteration) or iteration <= 0:
        raise PlanError("the plan file has no predicted step (predicted.iteration_ms); make "
                        "one with tracecli plan-buckets --out PLAN.json", path=path, line=1)
    sizes = tuple(sum(plan.inp.grads[i].nbytes for i in b) for b in plan.fixed.buckets)
    return plan.doc, sizes


def check_advice(plan_path: str, trace: Trace, before: RunReport, after: RunReport,
                 measured: Change, compute: ComputeRequest,
                 cost: Union[CostModel, CostRequest]) -> AdviceCheck:
    """RUN_B was made with the plan in ``plan_path``, planned from RUN_A (``trace``: its
    lowest rank's): the plan's predicted step beside RUN_A's own buckets predicted under the
    same model (the gain tracecli promised), and the step times measured (``measured``)."""
    doc, planned = _plan_doc(plan_path)
    clean, _ = run_trace(trace, before)
    model, notes = cost_for(clean, cost)
    if model.gpus != (before.run.world_size or model.gpus):
        model = model.on(before.run.world_size)
    own = as_run(clean, compute, model).plan
    predicted = as_run_prediction(own, model).timeline.iteration_ms
    if doc.get("cost_model") != json.loads(json.dumps(model.describe())):
        notes.append(f"{plan_path} was planned under another cost model "
                     f"({(doc.get('cost_model') or {}).get('name')}) than this comparison's "
                     f"({model.describe().get('name')}): pass the cost options it was planned with")
    ran = tuple(b.elements * DTYPE_BYTES[b.dtype] for b in run_buckets(after)
                if b.elements is not None and b.dtype in DTYPE_BYTES)
    applied = ran == planned if ran else None
    return AdviceCheck(plan_path, (doc.get("settings") or {}).get("text") or doc["strategy"],
                       predicted, float(doc["predicted"]["iteration_ms"]), measured, applied,
                       ran, planned, tuple(notes))
