"""Renderings of bucket plans and strategy comparisons, their advice and Chrome traces.

Tables are for reading; what to set in a framework is returned separately as plain lines
(:func:`plan_advice`, :func:`compare_advice`) that the CLI prints whole, so a setting is
never cut by a table cell and can be pasted as it is.
"""

from __future__ import annotations

import textwrap
from typing import Optional

from rich.console import Group
from rich.text import Text

from ..costs.alphabeta import NETWORKS
from ..planning import STRATEGIES
from ..planning.plan import is_default
from ..units import format_size
from .chrome import chrome_trace, complete_event
from .layout import NAME, WORD, Column, Fitted, with_rank
from .tables import format_ms as _ms, hidden_caption, plural, truncated

__all__ = ["plan_view", "compare_view", "plan_chrome_trace", "plan_advice", "compare_advice"]


def plan_header(plan) -> Text:
    t, c = plan.timeline, plan.cost
    text = Text()
    text.append("Plan ", style="bold")
    sizes = format_size(sum(g.nbytes for g in plan.inp.grads))
    m = c.describe()
    of = ("of" if plan.inp.unit_gradients else "for")
    known = "; sizes known per bucket only" if plan.inp.unit_gradients else ""
    ranks = m.get("measured_on_gpus") or (m.get("fit") or {}).get("ranks")
    text.append(f"{plan.strategy}: {plural(len(t.buckets), 'bucket')} {of} "
                f"{plural(plan.inp.gradient_count, 'gradient')} ({sizes}{known}) on "
                f"{plural(c.gpus, 'GPU')}"
                + (" — measured, as the run did it" if plan.measured else
                   f" — predicted by a model measured on {ranks} ranks"
                   if ranks and ranks != c.gpus else "") + "\n")
    text.append(f"cost model: {c.summary()}\n")
    text.append(f"compute: forward {_ms(t.forward_ms)} ms, backward "
                f"{_ms(t.backward_end_ms - t.forward_ms)} ms — {plan.inp.compute_source}")
    for note in plan.notes:
        text.append(f"\nnote: {note}", style="yellow")
    return text


def plan_summary(plan) -> Text:
    t = plan.timeline
    text = Text()
    text.append(f"iteration {_ms(t.iteration_ms)} ms = compute {_ms(t.compute_ms)} ms + exposed "
                f"communication {_ms(t.exposed_comm_ms)} ms; communication {_ms(t.comm_ms)} ms, "
                f"{t.overlap_pct:.1f}% hidden")
    if plan.lower_bound_ms and plan.measured:
        text.append(f"\nlower bound {_ms(plan.lower_bound_ms)} ms (compute alone: no model "
                    f"bounds a measurement); this run is {t.iteration_ms / plan.lower_bound_ms:.3f}x "
                    "of it")
    elif plan.lower_bound_ms:
        text.append(f"\nlower bound {_ms(plan.lower_bound_ms)} ms; this plan is "
                    f"{t.iteration_ms / plan.lower_bound_ms:.3f}x of it")
    return text


def _span(names: list[str]) -> str:
    if not names:
        return "?"
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"


# Which columns move to a second table first when a table is too wide: the last named.
PLAN_ORDER = ("gradients", "bytes", "start", "end", "comm", "ready", "n", "NCCL algo/proto")
COMPARE_ORDER = ("iteration ms", "vs best", "exposed ms", "hidden", "buckets", "vs run (model)")


def plan_view(plan, top: Optional[int] = None) -> Group:
    rows = []
    picks = [None if plan.measured else plan.cost.algorithm_protocol(b.collective, b.nbytes)
             for b in plan.timeline.buckets]
    picked = any(picks)
    for b, pick in zip(plan.timeline.buckets, picks):
        rows.append([str(b.index), str(plan.inp.gradients_in(b.members)) if b.members else "?",
                     _span(plan.tensor_names(b.index)), format_size(b.nbytes), _ms(b.ready_ms),
                     _ms(b.start_ms), _ms(b.end_ms), _ms(b.duration_ms)]
                    + (["/".join(pick) if pick else "-"] if picked else []))
    shown, hidden = truncated(rows, top)
    cols = [Column("#", key=True), Column("n"), Column("gradients", NAME, min_width=20)]
    cols += [Column(h) for h in ("bytes", "ready", "start", "end", "comm")]
    cols += [Column("NCCL algo/proto", WORD)] if picked else []
    buckets = Fitted("Buckets in launch order (ms from the step's start)",
                     with_rank(cols, PLAN_ORDER), shown, hidden_caption(hidden, "bucket"))
    return Group(plan_header(plan), buckets, plan_summary(plan))


def _wrap(text: str, indent: str = "") -> list[str]:
    """Prose of the advice, whole at 80 columns (settings to paste are never wrapped)."""
    return textwrap.wrap(text, 80, initial_indent=indent, subsequent_indent=indent + "  ")


def _native(framework: str):
    """The spec whose framework produced the trace, or ``None``."""
    return next((spec for spec in STRATEGIES.values() if framework and framework in spec.frameworks),
                None)


def _serves(plan) -> tuple[str, ...]:
    """The trace frameworks whose users can set ``plan``'s settings."""
    spec = STRATEGIES.get(plan.strategy)
    if spec is not None and spec.frameworks:
        return spec.frameworks
    if plan.settings.get("framework") == "pytorch-ddp":  # per-bucket caps are DDP's
        return STRATEGIES["ddp"].frameworks
    return ()


def plan_advice(plan, framework: str = "") -> list[str]:
    """What to set to get ``plan``, whole lines; on a trace another framework produced
    (``framework``), what that framework can do first."""
    text = plan.settings.get("text") or "no framework setting reproduces this plan"
    if plan.measured:
        return [f"The run's own buckets: {text}" if plan.settings.get("framework") else text]
    if not plan.settings.get("framework"):
        return [f"To get this plan: {text}"]
    native = _native(framework)
    if native is not None and framework not in _serves(plan):
        return _wrap(f"{native.title} (the trace's framework) cannot set this plan's buckets: "
                     f"--strategy {native.name} plans what {native.title} can set, and "
                     "--compare ranks it.") + ["In another framework, set:", *(f"  {line}" for line in text.splitlines())]
    return ["To get this plan, set:", *(f"  {line}" for line in text.splitlines())]


def model_error(cost) -> tuple[Optional[float], str]:
    """The model's error as a share of a collective's time (a fit's MAPE), with what it
    is; ``None`` where the model says nothing of its error (a preset)."""
    m = cost.describe()
    mape = (m.get("fit") or {}).get("mape_pct")
    if mape is not None:
        what = "trace fit" if m["name"] == "trace" else "calibration fit"
        return float(mape), f"{what} MAPE {mape:.0f}%"
    if m["name"] in NETWORKS:
        return None, f"under the {m['name']} preset, a guess whose error is unknown"
    if m.get("model") == "nccl":
        return None, ("under NCCL's pick timed by tracecli's fitted model, whose error per "
                      "size `tracecli collective` prints (--nccl-tests FILE answers the sizes "
                      "it measured)")
    return None, "the model's error is unknown"


def compare_view(rows, inp_plan) -> Group:
    as_run = _run_model(rows)
    cols = ["strategy", "buckets", "iteration ms", "exposed ms", "hidden", "vs best"]
    if as_run is not None:
        cols.append("vs run (model)")
    predicted = [r.plan.timeline.iteration_ms for r in rows if not r.plan.measured]
    best = min(predicted) if predicted else None
    lines = []
    for r in rows:
        t = r.plan.timeline
        cells = [r.label, str(len(r.plan.buckets)), _ms(t.iteration_ms), _ms(t.exposed_comm_ms),
                 f"{t.overlap_pct:.1f}%", f"{t.iteration_ms / best:.3f}x" if best else "-"]
        if as_run is not None:
            base = as_run.timeline.iteration_ms
            cells.append(f"{100.0 * (t.iteration_ms - base) / base:+.1f}%" if base else "-")
        lines.append(cells)
    columns = [Column(cols[0], NAME, key=True)] + [Column(h) for h in cols[1:]]
    strategies = Fitted("Strategies, best first (settings to paste are below)",
                        with_rank(columns, COMPARE_ORDER), lines)
    return Group(plan_header(inp_plan), strategies)


def _pct(a: float, b: float) -> str:
    return f"{100.0 * (a - b) / b:+.1f}%" if b else "-"


def _run_model(rows):
    """The run's own buckets under the rows' model ("as run (model)"), or ``None``."""
    return next((r.plan for r in rows if not r.plan.measured
                 and getattr(STRATEGIES.get(r.plan.strategy), "from_run", False)), None)


def _gain(plan, base, mape: Optional[float]) -> str:
    """``plan`` against ``base``: the difference, and the model's error on it."""
    a, b = plan.timeline.iteration_ms, base.timeline.iteration_ms
    text = f"{a - b:+.3f} ms ({_pct(a, b)})"
    if mape is not None:
        text += f" ±{_ms(mape / 100.0 * max(plan.timeline.comm_ms, base.timeline.comm_ms))} ms"
    return text


def compare_advice(rows, framework: str = "") -> list[str]:
    """Per framework (the trace's own first), the best setting found, against its
    defaults and the run's own buckets under the same model, each gain with the model's
    error; and whether the best gain is beyond that error: whole lines."""
    predicted = [r for r in rows if not r.plan.measured]
    run = _run_model(rows)
    strategies = [r for r in predicted if r.plan is not run]
    cost = strategies[0].plan.cost if strategies else None
    mape, error = model_error(cost) if cost is not None else (None, "")
    head = (f"under the {cost.name if cost else '?'} model; ± is its error, {error}"
            if mape is not None else f"{error}")
    lines = _wrap(f"What to set (predicted {head}):")

    def best(*names):
        found = [r for r in strategies if r.plan.strategy in names and r.plan.settings.get("framework")]
        return min(found, key=lambda r: r.plan.timeline.iteration_ms) if found else None

    def default(name):
        found = [r for r in strategies if r.plan.strategy == name and is_default(r.plan)]
        return found[0].plan if found else None

    native = _native(framework)
    specs = sorted(STRATEGIES.values(), key=lambda spec: spec is not native)
    for spec in specs:  # each framework with a title, the trace's own first
        row, base = best(spec.name), default(spec.name)
        if spec.title is None or row is None:
            continue
        ms = row.plan.timeline.iteration_ms
        lines.append(f"  {spec.title}{' (the trace' + chr(39) + 's framework)' if spec is native else ''}: "
                     f"{_ms(ms)} ms")
        if base is not None:
            lines.append("    the default is best" if abs(ms - base.timeline.iteration_ms) <= 1e-9
                         else f"    vs default {_ms(base.timeline.iteration_ms)} ms: "
                         + _gain(row.plan, base, mape))
        if run is not None:
            lines.append(f"    vs the run (model) {_ms(run.timeline.iteration_ms)} ms: "
                         + _gain(row.plan, run, mape))
        lines.extend(f"    {line}" for line in row.plan.settings["text"].splitlines())
    ddp = best("ddp")
    optimal = next((r for r in strategies if r.plan.strategy == "optimal"), None)
    if optimal is not None and optimal.plan.settings.get("framework"):
        lines.append(f"  Optimal plan, per-bucket caps (torch >= 2.13): "
                     f"{_ms(optimal.plan.timeline.iteration_ms)} ms")
        gain = None if ddp is None else \
            ddp.plan.timeline.iteration_ms - optimal.plan.timeline.iteration_ms
        if gain is not None and gain < 0.0005:  # nothing a per-bucket list would buy
            lines.append("    no better than the best bucket_cap_mb: nothing more to set")
        else:
            if ddp is not None:
                lines.append("    vs best bucket_cap_mb: " + _gain(optimal.plan, ddp.plan, mape))
            lines.append(f"    {optimal.plan.settings['text']}")
    if len(lines) == 1:
        lines.append("  no framework setting reproduces these plans")
    return lines + _verdict(strategies, run, native, mape, error, best, default)


def _verdict(strategies, run, native, mape, error, best, default) -> list[str]:
    """Whether the best gain over what the user has now is beyond the model's error."""
    settable = [r for r in strategies if r.plan.settings.get("framework")]
    current = run if run is not None else (default(native.name) if native is not None else None)
    if current is None or not settable:
        return []
    top = min(settable, key=lambda r: r.plan.timeline.iteration_ms)
    now = "the run's own buckets" if current is run else f"{native.title}'s defaults"
    gain = current.timeline.iteration_ms - top.plan.timeline.iteration_ms
    if gain <= 1e-9:
        return _wrap(f"Keep {now}: no setting is predicted faster.")
    err = None if mape is None else mape / 100.0 * max(current.timeline.comm_ms,
                                                        top.plan.timeline.comm_ms)
    said = f"{_ms(gain)} ms ({100.0 * gain / current.timeline.iteration_ms:.1f}%, {top.label})"
    if err is None:
        return _wrap(f"The best gain over {now}, {said}, is under a model whose error is "
                     "unknown; measure this machine (tracecli calibrate) before changing "
                     "settings.")
    if gain <= err:
        return _wrap(f"Within the model's error: the best gain over {now}, {said}, is inside "
                     f"±{_ms(err)} ms ({error}); keep {now}.")
    return _wrap(f"Beyond the model's error: the best gain over {now}, {said}, exceeds "
                 f"±{_ms(err)} ms ({error}).")


def plan_chrome_trace(plan, backward_names: list[tuple[str, float]]) -> dict:
    """Compute track (forward, each backward op) and communication track (buckets)."""
    t = plan.timeline
    events = [complete_event("forward", 0.0, t.forward_ms, 1, 1, "compute")]
    clock = t.forward_ms
    for name, ms in backward_names:
        events.append(complete_event(name, clock, ms, 1, 1, "compute"))
        clock += ms
    for b in t.buckets:
        names = plan.tensor_names(b.index) or ["?"]
        events.append(complete_event(
            f"bucket {b.index} ({format_size(b.nbytes)})", b.start_ms, b.duration_ms, 1, 2,
            b.collective.value, {"tensors": len(b.members), "bytes": b.nbytes, "ready_ms": b.ready_ms,
                          "first": names[0], "last": names[-1]}))
    return chrome_trace(events, {(1, 1): "compute (predicted)", (1, 2): "all-reduce (predicted)"},
                        {1: f"tracecli plan: {plan.strategy}"})
