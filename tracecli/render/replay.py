"""Rich renderings of replay and calibration reports, and the replay's Chrome trace."""

from __future__ import annotations

from typing import Optional

from rich.console import Group
from rich.text import Text

from ..units import format_size
from .chrome import chrome_trace, complete_event
from .tables import add_rows, format_ms as _ms, new_table, plural, truncated, value_columns

__all__ = ["replay_view", "calibration_view", "replay_chrome_trace"]



def replay_view(doc: dict, top: Optional[int] = None) -> Group:
    r, m, p = doc["replay"], doc["measured"], doc["predicted"]
    head = Text()
    head.append("Replay ", style="bold")
    head.append(f"{doc['strategy']}: {plural(len(doc['buckets']), 'bucket')} on "
                f"{plural(r['ranks'], 'rank')}, {r['backend']} on {r['device']}; "
                f"{plural(r['iters'], 'timed iteration')} after {r['warmup']} warm-up\n")
    cm = doc["cost_model"]
    head.append(f"prediction: {cm['name']}: alpha {cm['alpha_us']:.2f} us, bus bandwidth "
                f"{cm['bandwidth_gbps']:.3f} GB/s — {cm['source']}\n")
    head.append(f"compute: {doc['compute']['source']}")
    table = new_table("Buckets: predicted vs measured (ms from step start; medians)")
    bare = "bare_allreduce_ms" in (doc["buckets"][0]["measured"] if doc["buckets"] else {})
    rows = []
    for b in doc["buckets"]:
        mb = b["measured"]
        rows.append([str(b["index"]), format_size(b["bytes"]), _ms(b["start_ms"]), _ms(mb["start_ms"]),
                     _ms(b["end_ms"]), _ms(mb["end_ms"]), _ms(b["duration_ms"]), _ms(mb["duration_ms"])]
                    + ([_ms(mb["bare_allreduce_ms"])] if bare else []))
    shown, hidden = truncated(rows, top)
    buckets = value_columns(table, ["#", "bytes", "pred start", "meas start", "pred end",
                                    "meas end", "pred comm", "meas comm"]
                            + (["bare comm"] if bare else []), shown)
    add_rows(table, shown, hidden, "bucket")
    summary = new_table("Iteration")
    lines = [["iteration ms", _ms(p["iteration_ms"]), _ms(m["iteration_ms"]),
              _ms(m["iteration_p90_ms"]), f"{doc['error_pct']:+.1f}%"],
             ["exposed comm ms", _ms(p["exposed_comm_ms"]), _ms(m["exposed_comm_ms"]), "", ""]]
    iteration = value_columns(summary, ["", "predicted", "measured median", "measured p90",
                                        "error"], lines)
    for line in lines:
        summary.add_row(*line)
    tail = Text(("buffers verified: every rank holds the exact sum" if r["verified"]
                 else "BUFFERS DID NOT VERIFY: a reduced buffer differs from the expected sum"),
                style=None if r["verified"] else "bold red")
    return Group(head, buckets, iteration, tail)


def calibration_view(doc: dict) -> Group:
    table = new_table(f"all-reduce on {plural(doc['gpus'], 'rank')} ({doc['backend']}, {doc['device']})")
    p = doc["gpus"]
    rows = []
    for pt in doc["points"]:
        mean = pt.get("mean_ms", pt["median_ms"])
        err = 100.0 * (pt["predicted_ms"] - mean) / mean
        busbw = pt["bytes"] / (mean / 1000.0) * 2 * (p - 1) / p / 1e9
        rows.append([format_size(pt["bytes"]), _ms(mean), _ms(pt["median_ms"]),
                     _ms(pt["predicted_ms"]), f"{err:+.1f}%", f"{busbw:.3f}"])
    points = value_columns(table, ["bytes", "mean ms", "median ms", "line ms", "line error",
                                   "bus GB/s"], rows)
    for row in rows:
        table.add_row(*row)
    fit = doc["fit"]
    text = Text(f"fit: alpha {doc['alpha_us']:.2f} us per step, bus bandwidth "
                f"{doc['bandwidth_gbps']:.3f} GB/s; R² {fit['r2']:.4f}, MAPE {fit['mape_pct']:.1f}%\n"
                "predictions use the measured means at these sizes (log-log between them); the "
                "line only beyond them")
    if fit.get("poor"):
        text.append("\npoor fit: the alpha-beta model does not explain these timings well; "
                    "predictions from it are rough", style="bold yellow")
    return Group(points, text)


def replay_chrome_trace(doc: dict) -> dict:
    """Predicted (pid 1) and measured (pid 2) tracks side by side, one timed iteration."""
    c = doc["compute"]
    events = [complete_event("forward + backward (emulated)", 0.0, c["forward_ms"] + c["backward_ms"],
                             1, 1, "compute")]
    for b in doc["buckets"]:
        events.append(complete_event(f"bucket {b['index']}", b["start_ms"], b["duration_ms"], 1, 2,
                                     "allreduce", {"bytes": b["bytes"]}))
        mb = b["measured"]
        events.append(complete_event(f"bucket {b['index']}", mb["start_ms"], mb["duration_ms"], 2, 2,
                                     "allreduce", {"bytes": b["bytes"]}))
    events.append(complete_event("iteration (median)", 0.0, doc["measured"]["iteration_ms"], 2, 1,
                                 "step"))
    return chrome_trace(events, {(1, 1): "compute", (1, 2): "all-reduce", (2, 1): "step",
                                 (2, 2): "all-reduce"},
                        {1: "predicted", 2: f"measured ({doc['replay']['backend']})"})
