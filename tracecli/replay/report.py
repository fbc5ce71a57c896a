"""Measured against predicted: the replay and calibration reports (pure; no torch)."""

from __future__ import annotations

import statistics
from typing import Any

from ..planning.costmodel import calibration_doc
from ..render.jsonout import plan_doc
from ..planning.fit import fit_ring, trimmed_mean
from .jobs import ReplayJob

__all__ = ["replay_report", "calibration_report", "percentile"]


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]).

    >>> percentile([1.0, 2.0, 3.0, 4.0], 90)
    3.7
    """
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def replay_report(job: ReplayJob, payload: dict[str, Any]) -> dict[str, Any]:
    timeline = payload["timeline"]
    plan = payload["plan"]
    doc = plan_doc(plan)
    ranks = payload["ranks"]
    n_iter = len(ranks[0]["iterations"])
    n_buckets = len(timeline.buckets)
    iterations = [max(r["iterations"][i]["iteration_ms"] for r in ranks) for i in range(n_iter)]

    def slowest(key: str, i: int, k: int) -> float:
        return max(r["iterations"][i][key][k] for r in ranks)

    buckets = []
    for k in range(n_buckets):
        launch = [slowest("launch_ms", i, k) for i in range(n_iter)]
        start = [slowest("start_ms", i, k) for i in range(n_iter)]
        end = [slowest("end_ms", i, k) for i in range(n_iter)]
        duration = [e - s for s, e in zip(start, end)]
        buckets.append({"index": k, "ready_ms": statistics.median(launch),
                        "start_ms": statistics.median(start), "end_ms": statistics.median(end),
                        "duration_ms": statistics.median(duration),
                        "mean_duration_ms": trimmed_mean(duration)})
    median = statistics.median(iterations)
    predicted = timeline.iteration_ms
    doc["measured"] = {
        "iteration_ms": median,
        "iteration_p90_ms": percentile(iterations, 90),
        "iterations_ms": iterations,
        "exposed_comm_ms": median - timeline.compute_ms,
        "comm_ms": sum(b["duration_ms"] for b in buckets),
        "buckets": buckets,
    }
    baseline = payload.get("baseline_ms")
    if baseline is not None:
        for m, bare in zip(buckets, baseline):
            m["bare_allreduce_ms"] = bare
            m["overhead_pct"] = 100.0 * (m["duration_ms"] - bare) / bare if bare > 0 else None
    doc["error_pct"] = 100.0 * (median - predicted) / predicted if predicted else None
    for b, m in zip(doc["buckets"], buckets):
        b["measured"] = {key: m[key] for key in ("ready_ms", "start_ms", "end_ms", "duration_ms",
                                                 "mean_duration_ms", "bare_allreduce_ms",
                                                 "overhead_pct") if key in m}
    doc["replay"] = {
        "backend": payload["backend"],
        "device": payload["device"],
        "ranks": payload["world"],
        "iters": job.iters,
        "warmup": job.warmup,
        "verified": payload["verified"],
        "cost_source": job.cost_source if payload["calibration"] is None else "in-place calibration",
        "calibration": payload["calibration"],
        "buffers": payload["buffers"],
    }
    return doc


def calibration_report(payload: dict[str, Any]) -> dict[str, Any]:
    points = payload["points"]
    world = payload["world"]
    fit = fit_ring([(p["bytes"], p["mean_ms"]) for p in points], world)
    rows = [{**p, "predicted_ms": fit.latency_ms + fit.ms_per_byte * p["bytes"]} for p in points]
    doc = calibration_doc(payload["backend"], world, "ring", fit.alpha_us, fit.bandwidth_gbps,
                          fit.r2, fit.mape_pct, rows, payload["device"])
    doc["fit"]["poor"] = fit.poor
    return doc
