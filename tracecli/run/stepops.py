"""What a rank did in each step, op by op: the records that say why a rank was late.

A step's ops (:class:`StepOps`), in the order they began:

- on the step's own thread, each host op at the top of the step (under nothing but user
  annotations such as ``DistributedDataParallel.forward``): ``forward`` before backward,
  ``backward`` during it, ``other`` after it; an ``Optimizer.*`` annotation is one
  ``optimizer`` op, an ``enumerate(DataLoader)*`` one is ``data``, a ``c10d::`` launch is
  ``collective`` (a blocking send or recv waits inside it);
- each top-level ``autograd::engine::evaluate_function`` on any thread: ``backward``;
- the step thread's time in no op, outside backward, when it reaches :data:`GAP_MIN_US`:
  ``untraced`` host time (a ``time.sleep``, Python work the profiler does not record),
  named by the op it follows.

An op is keyed ``NAME #K`` (K: its occurrence among the step's ops of that name, from 0),
so the same op is found on every rank. Durations are on the step's clock: on a GPU trace,
the device time the op took (see :mod:`tracecli.parsers.kineto_device`); an op the device
did not wait for (host time while the device was busy) takes none.

``compute_ms`` is the time the step computed (on a GPU, its compute kernels; on the host,
its forward, backward and optimizer ops), overlaps once; ``exposed_ms`` the time a
collective ran with no compute running.
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Any, NamedTuple, Optional, Sequence

from ..model import Collective
from ..parsers.kineto_device import StepClock
from ..parsers.kineto_threads import EVALUATE, Step, Thread
from .spans import covered, merged, overlap

__all__ = ["StepOps", "step_ops", "GAP_MIN_US", "CATEGORIES"]

GAP_MIN_US = 50.0
CATEGORIES = ("forward", "backward", "optimizer", "data", "collective", "other", "untraced")
_WHOLE = (("Optimizer.", "optimizer"), ("enumerate(DataLoader)", "data"))
_COMPUTE = frozenset({"forward", "backward", "optimizer", "other"})


class StepOps(NamedTuple):
    keys: tuple[str, ...]  # "NAME #K"; one tuple shared by the steps whose ops are alike
    kinds: tuple[str, ...]  # each op's category (CATEGORIES)
    ms: array  # each op's duration on the step's clock
    compute_ms: float
    exposed_ms: float

    def by_key(self) -> dict[str, float]:
        return dict(zip(self.keys, self.ms))


def _whole(name: str) -> Optional[str]:
    for prefix, kind in _WHOLE:
        if name.startswith(prefix):
            return kind
    return None


def _main_ops(main: Thread, step: Step) -> list[tuple[Any, str]]:
    """(event, category or None) of the top-level ops of the step's thread."""
    found = []
    for i in main.within(step.ts, step.end):
        e = main.events[i]
        if e.ts >= step.end or e.name == step.label:
            continue
        chain = [a for a in main.ancestors(i) if a.ts >= step.ts]
        if any(a.cat != "user_annotation" or _whole(a.name) for a in chain):
            continue
        kind = _whole(e.name) if e.cat == "user_annotation" else None
        if kind is not None or e.cat == "cpu_op":
            found.append((e, kind))
    return found


def _backward_ops(threads: dict[Any, Thread], step: Step) -> list[Any]:
    found = []
    for tid, thread in threads.items():
        if tid == step.tid:
            continue
        for i in thread.within(step.ts, step.end):
            e = thread.events[i]
            if e.name.startswith(EVALUATE) and not any(a.name.startswith(EVALUATE)
                                                       for a in thread.ancestors(i)):
                found.append(e)
    return found


def _category(e, kind: Optional[str], backward: Optional[tuple[float, float]]) -> str:
    if kind is not None:
        return kind
    if e.name.startswith(EVALUATE):
        return "backward"
    if e.name.startswith("c10d::"):
        return "collective"
    if backward is None or e.ts < backward[0]:
        return "forward"
    return "backward" if e.ts <= backward[1] else "other"


def _minus(lo: float, hi: float, hole: Optional[tuple[float, float]]) -> list[tuple[float, float]]:
    """``[lo, hi]`` without ``hole``."""
    if hole is None or hole[1] <= lo or hole[0] >= hi:
        return [(lo, hi)]
    return [p for p in ((lo, hole[0]), (hole[1], hi)) if p[1] > p[0]]


def _gaps(spans: list[tuple[float, float, str]], step: Step,
          backward: Optional[tuple[float, float]]) -> list[tuple[float, float, str]]:
    """The step thread's time in no op and outside backward, named by the op before it."""
    out, clock, before = [], step.ts, None
    for a, b, key in sorted(spans) + [(step.end, step.end, None)]:
        name = f"untraced host time after {before}" if before else "untraced host time at the step start"
        out.extend((lo, hi, name) for lo, hi in _minus(clock, a, backward) if hi - lo >= GAP_MIN_US)
        if b > clock:
            clock, before = b, key
    return out


def step_ops(threads: dict[Any, Thread], step: Step, clock: StepClock,
             backward: Optional[tuple[float, float]], collectives: Sequence[Collective],
             seen: dict) -> StepOps:
    """The ops of ``step`` (host times ``backward``: its backward pass's window), their
    durations on ``clock``, its compute and exposed communication. ``seen`` shares equal key
    tuples between steps (and so between the records a worker sends back)."""
    picked = [(e, _category(e, kind, backward)) for e, kind in _main_ops(threads[step.tid], step)]
    picked += [(e, "backward") for e in _backward_ops(threads, step)]
    picked.sort(key=lambda p: (p[0].ts, p[0].line))
    counts: Counter = Counter()
    rows, main_spans = [], []
    for e, kind in picked:
        key = f"{e.name} #{counts[e.name]}"
        counts[e.name] += 1
        rows.append((e.ts, e.end, key, kind))
        if e.tid == step.tid:
            main_spans.append((e.ts, e.end, key))
    for a, b, name in _gaps(main_spans, step, backward):
        rows.append((a, b, name if not counts[name] else f"{name} ({counts[name] + 1})", "untraced"))
        counts[name] += 1
    rows.sort(key=lambda r: r[0])
    spans = [clock.span_ms(a, b - a) for a, b, _, _ in rows]
    keys = tuple(r[2] for r in rows)
    kinds = tuple(r[3] for r in rows)
    keys, kinds = seen.setdefault(keys, keys), seen.setdefault(kinds, kinds)
    device = clock.compute_ms()
    compute = merged(device if device is not None else
                     [(s, s + d) for (s, d), r in zip(spans, rows) if r[3] in _COMPUTE])
    comm = merged((c.start_ms, c.end_ms) for c in collectives
                  if c.start_ms is not None and c.end_ms is not None)
    exposed = covered(comm) - overlap(comm, compute)
    return StepOps(keys, kinds, array("d", (d for _, d in spans)), covered(compute), exposed)
