"""Rich renderings of replay reports and calibration profiles, and the replay's Chrome trace.

They read the typed results (:class:`~tracecli.replay.report.ReplayReport`,
:class:`~tracecli.costs.CalibrationProfile`); render never imports replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rich.console import Group
from rich.text import Text

from ..costs import CalibrationProfile, bus_bandwidth_gbps
from ..model import CollectiveKind
from ..units import format_size
from .chrome import chrome_trace, complete_event
from .layout import Column, Fitted, with_rank
from .tables import format_ms as _ms, hidden_caption, plural, truncated

if TYPE_CHECKING:
    from ..replay.report import ReplayReport

__all__ = ["replay_view", "calibration_view", "replay_chrome_trace"]


# Which columns move to a second table first when a table is too wide: the last named.
REPLAY_ORDER = ("bytes", "pred comm", "meas comm", "pred end", "meas end", "pred start",
                "meas start", "bare comm")
CALIBRATION_ORDER = ("mean ms", "line ms", "line error", "NCCL model ms", "NCCL error",
                     "median ms", "bus GB/s")


def replay_view(report: "ReplayReport", top: Optional[int] = None) -> Group:
    r, m, plan = report.replay, report.measured, report.plan
    p = plan.timeline
    head = Text()
    head.append("Replay ", style="bold")
    head.append(f"{plan.strategy}: {plural(len(p.buckets), 'bucket')} on "
                f"{plural(r.ranks, 'rank')}, {r.backend} on {r.device}; "
                f"{plural(r.iters, 'timed iteration')} after {r.warmup} warm-up\n")
    head.append(f"prediction: {plan.cost.summary()}\n")
    head.append(f"compute: {plan.inp.compute_source}")
    bare = bool(m.buckets) and m.buckets[0].bare_ms is not None
    rows = []
    for b, mb in zip(p.buckets, m.buckets):
        rows.append([str(b.index), format_size(b.nbytes), _ms(b.start_ms), _ms(mb.start_ms),
                     _ms(b.end_ms), _ms(mb.end_ms), _ms(b.duration_ms), _ms(mb.duration_ms)]
                    + ([_ms(mb.bare_ms)] if bare else []))
    shown, hidden = truncated(rows, top)
    cols = [Column("#", key=True)] + [Column(h) for h in (
        "bytes", "pred start", "meas start", "pred end", "meas end", "pred comm", "meas comm")]
    cols += [Column("bare comm")] if bare else []
    buckets = Fitted("Buckets: predicted vs measured (ms from step start; medians)",
                     with_rank(cols, REPLAY_ORDER), shown, hidden_caption(hidden, "bucket"))
    lines = [["iteration ms", _ms(p.iteration_ms), _ms(m.iteration_ms),
              _ms(m.iteration_p90_ms),
              f"{report.error_pct:+.1f}%" if report.error_pct is not None else "-"],
             ["exposed comm ms", _ms(p.exposed_comm_ms), _ms(m.exposed_comm_ms), "", ""]]
    iteration = Fitted("Iteration", [Column("", key=True)] + [Column(h) for h in (
        "predicted", "measured median", "measured p90", "(pred-meas)/meas")], lines)
    held = ("every rank holds the exact sum" if report.plan.fsdp is None else
            "every all-gather, reduce-scatter and all-reduce exact on its group")
    tail = Text((f"buffers verified: {held}" if r.verified
                 else "BUFFERS DID NOT VERIFY: a reduced buffer differs from the expected sum"),
                style=None if r.verified else "bold red")
    return Group(head, buckets, iteration, tail)


def calibration_view(profile: CalibrationProfile, nccl=None) -> Group:
    """The measured sizes; with ``nccl`` (NCCL's model of the topology given), its
    prediction at each size beside them."""
    rows = []
    for pt in profile.points:
        mean = pt.mean_ms
        err = 100.0 * (pt.predicted_ms - mean) / mean
        busbw = bus_bandwidth_gbps(CollectiveKind.ALL_REDUCE, pt.bytes, mean, profile.gpus)
        rows.append([format_size(pt.bytes), _ms(mean), _ms(pt.median_ms),
                     _ms(pt.predicted_ms), f"{err:+.1f}%", f"{busbw:.3f}"])
        if nccl is not None:
            ms = nccl.time_ms(CollectiveKind.ALL_REDUCE, pt.bytes)
            rows[-1] += [_ms(ms), f"{100.0 * (ms - mean) / mean:+.1f}%"]
    cols = [Column("bytes", key=True)] + [Column(h) for h in (
        "mean ms", "median ms", "line ms", "line error", "bus GB/s")]
    cols += [Column("NCCL model ms"), Column("NCCL error")] if nccl else []
    points = Fitted(f"all-reduce on {plural(profile.gpus, 'rank')} ({profile.backend}, "
                    f"{profile.device})", with_rank(cols, CALIBRATION_ORDER), rows)
    text = Text(f"fit: alpha {profile.alpha_us:.2f} us per step, bus bandwidth "
                f"{profile.bandwidth_gbps:.3f} GB/s; R² {profile.r2:.4f}, MAPE "
                f"{profile.mape_pct:.1f}%\n"
                "predictions use the measured means at these sizes (log-log between them); the "
                "line only beyond them")
    if nccl is not None:
        text.append(f"\nNCCL model: {nccl.summary()}")
    if profile.poor:
        text.append("\npoor fit: the alpha-beta model does not explain these timings well; "
                    "predictions from it are rough", style="bold yellow")
    return Group(points, text)


def replay_chrome_trace(report: "ReplayReport") -> dict:
    """Predicted (pid 1) and measured (pid 2) tracks side by side, one timed iteration."""
    t = report.plan.timeline
    events = [complete_event("forward + backward (emulated)", 0.0,
                             t.forward_ms + (t.backward_end_ms - t.forward_ms), 1, 1, "compute")]
    for b, mb in zip(t.buckets, report.measured.buckets):
        kind = b.collective.value
        events.append(complete_event(f"bucket {b.index}", b.start_ms, b.duration_ms, 1, 2, kind,
                                     {"bytes": b.nbytes}))
        events.append(complete_event(f"bucket {b.index}", mb.start_ms, mb.duration_ms, 2, 2, kind,
                                     {"bytes": b.nbytes}))
    events.append(complete_event("iteration (median)", 0.0, report.measured.iteration_ms, 2, 1,
                                 "step"))
    return chrome_trace(events, {(1, 1): "compute", (1, 2): "all-reduce", (2, 1): "step",
                                 (2, 2): "all-reduce"},
                        {1: "predicted", 2: f"measured ({report.replay.backend})"})
