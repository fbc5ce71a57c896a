"""Timing collectives the way a replay runs them, for calibration.

A bare loop (barrier, all-reduce, repeat) measures something else than a replay does:
after a barrier the ranks leave at different instants; back-to-back runs keep the
transport's threads hot; a fresh buffer pays its first touch. Measured on this project's
2-core CPU machine, interleaved, 120 rounds of 4 MiB on 2 gloo ranks: back-to-back 4.5 ms,
after an idle gap 5.2-5.5 ms, a first-touched buffer 7.5 ms (``docs/replay.md``).

So each size here is timed as the replay runs its buckets: the buffer refilled (touched)
first, its collective launched through the step's own communication path at an instant
all ranks share, after an idle gap; the sizes interleaved round by round so that drift in
the machine's state hits every size alike. Per size, per run, the slowest rank's time;
per size, the 10%-trimmed mean (iteration times add bucket times, and means add where
medians do not), with the median and every run kept.

A bucket that waits for the one before it starts on a transport that is still busy, and
runs faster than one launched alone after idle (4 ranks on 2 cores: 20-40% faster for
tens of MiB). So each round also times every size *queued*: all launched at once behind a
4-byte collective, each timed from when the channel took it; both figures are kept and
the timeline uses the one that matches how a bucket starts.

On the GPU a sample is only what it says when the host had launched its collectives before
the device got to them: a queued collective launched after the one before it ended ran
alone, and one launched after its ready event was recorded carries the host's launch gap.
The compute stream idles :data:`GAP_MS` (plus a hold the host proved it needs) before the
launches, and a step whose compute stream got past its launch point later than that
(``step.host_lag_ms``, agreed by every rank) is not sampled; the hold then doubles, up to
:data:`MAX_HOLD_MS`, beyond which samples are kept as they are.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional, Sequence

import torch

from ..costs import ProfilePoint, trimmed_mean
from ..errors import ReplayError
from ..model import CollectiveKind
from .buckets import BucketBuffer
from .records import Schedule

__all__ = ["measure", "slowest", "GAP_MS"]

GAP_MS = 2.0  # idle before each launch, as a bucket's wait for its last gradient
LAG_SLACK_MS = 0.05  # a step whose host lagged the device by more is not sampled
MAX_HOLD_MS = 100.0  # at most this much more idle to let the host get ahead


def slowest(values: list[float], comm, device) -> list[float]:
    """Element-wise maximum of ``values`` over all ranks of ``comm`` (every rank gets it)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    comm.all_reduce(t, op="max")
    return [float(v) for v in t.cpu()]


def measure(make_step, buffers, indices: Sequence[int], comm, device, rounds: int,
            warmup: int = 1, budget_s: Optional[float] = None, max_rounds: int = 30,
            on_round: Optional[Callable[[int, int], None]] = None,
            before_round: Optional[Callable[[int], None]] = None) -> list[ProfilePoint]:
    """Time each of ``buffers[k]`` for k in ``indices`` (see the module's docstring), with
    ``make_step(buffers)`` the emulator the replay uses, ``comm`` this rank's
    :class:`~.comm.Comm`.

    ``rounds`` timed rounds after ``warmup``; with ``budget_s``, as many more rounds (up to
    ``max_rounds``) as fit in that many seconds after the first, agreed by all ranks.
    Returns a :class:`~tracecli.costs.ProfilePoint` per index, in order.
    """
    lead = BucketBuffer(4, "float32", CollectiveKind.ALL_REDUCE, buffers[indices[0]].world, device)
    pool = list(buffers) + [lead]
    step = make_step(pool)
    samples: dict[int, list[float]] = {k: [] for k in indices}
    queued: dict[int, list[float]] = {k: [] for k in indices}
    rank = comm.rank
    total = warmup + rounds
    hold = 0.0  # more idle before the launches, when the host proved it needs it
    r = 0
    while r < total:
        if before_round is not None:
            before_round(r)
        started = time.perf_counter()
        shift = r % max(1, len(indices))
        order = list(indices[shift:]) + list(indices[:shift])
        runs = []
        at = GAP_MS + hold
        for k in order:  # alone, after idle
            buffers[k].fill(rank)
            runs.append(step.run(Schedule((at,), at, 0.0, (k,))))
        for k in order:  # queued: all at once, behind a 4-byte collective
            buffers[k].fill(rank)
        lead.fill(rank)
        runs.append(step.run(Schedule((at,) * (len(order) + 1), at, 0.0, (len(pool) - 1, *order))))
        kept, hold = _kept(runs, step, comm, device, hold)
        if r >= warmup:
            for k, times, keep in zip(order, runs, kept):
                if keep:
                    samples[k].append(times.end_ms[0] - times.start_ms[0])
            if kept[-1]:
                for j, k in enumerate(order, 1):
                    queued[k].append(runs[-1].end_ms[j] - runs[-1].start_ms[j])
        if budget_s is not None and r == warmup:  # every rank agrees on the slowest round
            per_round = slowest([time.perf_counter() - started], comm, device)[0]
            extra = int(budget_s / max(per_round, 1e-3))
            total = max(total, min(warmup + max_rounds, warmup + 1 + extra))
        r += 1
        if on_round is not None:
            on_round(r, total)
    return _points(buffers, indices, samples, queued, comm, device)


def _kept(runs, step, comm, device, hold: float) -> tuple[list[bool], float]:
    """Which runs of a round to sample (every rank agrees), and the hold for the next round."""
    lags = [step.host_lag_ms(times) for times in runs]
    if lags[0] is None:
        return [True] * len(runs), hold
    worst = slowest(lags, comm, device)
    kept = [lag <= LAG_SLACK_MS or hold >= MAX_HOLD_MS for lag in worst]
    if max(worst) > LAG_SLACK_MS and hold < MAX_HOLD_MS:
        hold = min(MAX_HOLD_MS, max(2.0 * hold, 2.0 * max(worst)))
    return kept, hold


def _points(buffers, indices, samples, queued, comm, device) -> list[ProfilePoint]:
    """Per size, the slowest rank's samples (ranks kept the same runs) and their summaries."""
    flat = slowest([t for k in indices for t in samples[k] + queued[k]], comm, device)
    result, at = [], 0
    for k in indices:
        n, q = len(samples[k]), len(queued[k])
        times, waited = flat[at:at + n], flat[at + n:at + n + q]
        at += n + q
        if not times:
            raise ReplayError(f"no sample of {buffers[k].nbytes} bytes could be timed: the host "
                              "never got ahead of the GPU; raise --iters")
        result.append(ProfilePoint(buffers[k].nbytes, trimmed_mean(times), statistics.median(times),
                                   tuple(times), tuple(waited),
                                   statistics.median(waited) if waited else None,
                                   trimmed_mean(waited) if waited else None))
    return result
