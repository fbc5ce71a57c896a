"""What to set in each framework: the advice, decided here as data; the text and the JSON
render the same records (DESIGN 5, README ``"advice"``).

One :class:`Advice` per framework shown, the trace's own first. Each compares the best plan
that framework's own settings can make (its tuning grid, and for PyTorch DDP every
contiguous plan its per-bucket caps reproduce) with the reference: the run's own buckets
predicted under the same model where the trace is a profiled run of that framework, else
the framework's defaults. The verdict is ``set`` only where the gain over the reference is
larger than the model's error on those plans (:func:`~.accuracy.plan_error`: the larger of
the two plans' iteration errors); a tie, a loss, a gain inside the error, or a gain under
a model whose error is unknown is ``keep-defaults``, which pastes the defaults (or nothing,
against the run's own settings). Among plans within the best one's error the simplest
setting is pasted (one ``bucket_cap_mb`` before a list of per-bucket caps).

ChainerMN (a Chainer trace) all-reduces every gradient in one packed buffer after backward
(``chainermn/optimizers.py`` ``_MultiNodeOptimizer.update`` calls
``communicator.allreduce_grad``, which packs all gradients into one buffer for one
``allReduce``: ``chainermn/communicators/pure_nccl_communicator.py``): the ``single`` plan,
with no bucket setting, so its verdict is always "nothing to set".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .accuracy import plan_error
from .plan import BucketPlan, CompareRow, compare, is_default, make_plan
from .strategies import STRATEGIES

__all__ = ["Advice", "SET", "KEEP", "compare_advice", "plan_advice", "CHAINER"]

SET, KEEP = "set", "keep-defaults"
CHAINER = "chainermn"
_RUN_ROW = "as run (model)"


@dataclass(frozen=True)
class Advice:
    """What to do in one framework (see the module's docstring). ``reference``: ``run``
    (the run's own buckets) or ``defaults``; ``plan``: the row whose plan ``best_ms`` is;
    ``traced``: the framework the trace shows (others read "if you used ...")."""

    framework: str
    title: str
    verdict: str
    best_ms: Optional[float]
    default_ms: Optional[float]
    gain_ms: Optional[float]
    error_ms: Optional[float]
    paste: str
    why: str
    traced: bool = False
    reference: str = "defaults"
    plan: str = ""
    candidate: str = ""  # a keep verdict's faster setting, not shown to be faster: to try

    def to_json(self) -> dict[str, Any]:
        return {"framework": self.framework, "verdict": self.verdict, "best_ms": self.best_ms,
                "default_ms": self.default_ms, "gain_ms": self.gain_ms, "error_ms": self.error_ms,
                "paste": self.paste, "why": self.why, "title": self.title,
                "trace_framework": self.traced, "reference": self.reference, "plan": self.plan,
                "candidate": self.candidate or None}


def _key(plan: BucketPlan) -> Optional[str]:
    return plan.settings.get("framework")


def _simplicity(plan: BucketPlan) -> int:
    """How much there is to paste: a list of per-bucket caps counts its entries."""
    return len(plan.settings.get("bucket_cap_mb_list") or ())


def _ms(x: float) -> str:
    return f"{x:,.3f}"


def _choose(candidates: list[tuple[str, BucketPlan]]):
    """The plan to paste: the simplest within the fastest one's error (the fastest where that
    error is unknown), with its error."""
    fastest = min(candidates, key=lambda c: (c[1].timeline.iteration_ms, _simplicity(c[1])))
    error = plan_error(fastest[1])
    slack = error.ms if error.ms is not None else 1e-9 * max(1.0, fastest[1].timeline.iteration_ms)
    near = [c for c in candidates if c[1].timeline.iteration_ms <= fastest[1].timeline.iteration_ms + slack]
    return min(near, key=lambda c: (_simplicity(c[1]), c[1].timeline.iteration_ms))


def _entry(title: str, framework: str, candidates, reference: BucketPlan, against_run: bool,
           traced: bool) -> Advice:
    label, best = _choose(candidates)
    best_ms, ref_ms = best.timeline.iteration_ms, reference.timeline.iteration_ms
    gain = ref_ms - best_ms
    errors = [plan_error(best), plan_error(reference)]
    err = None if any(e.ms is None for e in errors) else max(e.ms for e in errors)
    basis = next((e.basis for e in errors if e.ms is None), errors[0].basis)
    ref_words = "the run's own buckets" if against_run else "the defaults"
    defaults = "" if against_run else reference.settings.get("text", "")
    said = f"{label} is predicted {_ms(gain)} ms ({100.0 * gain / ref_ms:.1f}%) faster than {ref_words}" \
        if ref_ms else ""
    unchanged = not against_run and is_default(best)
    tie = 1e-9 * max(1.0, ref_ms)
    if gain <= tie or unchanged:
        why = (f"{label} is predicted {_ms(-gain)} ms ({-100.0 * gain / ref_ms:.1f}%) slower than "
               f"{ref_words}: keep {ref_words}." if gain < -tie and not unchanged and ref_ms else
               f"no setting is predicted faster than {ref_words} ({_ms(ref_ms)} ms).")
        return Advice(framework, title, KEEP, best_ms, ref_ms, gain, err, defaults, why,
                      traced, "run" if against_run else "defaults", label)
    if err is None:
        why = (f"{said}, but the model's error is unknown ({basis}), so that gain is not shown "
               "to be real; measure this machine (tracecli calibrate) before changing it.")
        verdict, paste = KEEP, defaults
    elif gain <= err:
        why = (f"{said}, inside the model's error of ±{_ms(err)} ms ({basis}): keep "
               f"{ref_words}.")
        verdict, paste = KEEP, defaults
    else:
        why = f"{said}, beyond the model's error of ±{_ms(err)} ms ({basis})."
        verdict, paste = SET, best.settings["text"]
    return Advice(framework, title, verdict, best_ms, ref_ms, gain, err, paste, why, traced,
                  "run" if against_run else "defaults", label,
                  best.settings["text"] if verdict == KEEP else "")


def _chainer(single: BucketPlan) -> Advice:
    ms = single.timeline.iteration_ms
    return Advice(CHAINER, "ChainerMN", KEEP, ms, ms, 0.0, None, "",
                  "ChainerMN all-reduces every gradient in one packed buffer after backward "
                  f"(the single plan, {_ms(ms)} ms) and has no bucket setting: nothing to set.",
                  True, "defaults", "single")


def _specs(framework: str, inp):
    """The specs that advise here (a title, and they plan this input), the trace's
    framework's first. A spec that makes its whole plan (FSDP's ``planner``) advises from its
    own ``--compare`` rows (:mod:`.fsdp.advice`), not here."""
    titled = [s for s in STRATEGIES.values() if s.title is not None and not s.from_run
              and s.planner is None and (s.applies is None or s.applies(inp))]
    return sorted(titled, key=lambda s: framework not in s.frameworks)


def _default_of(spec, plans: Sequence[tuple[str, BucketPlan]], inp, cost, options) -> BucketPlan:
    for _, plan in plans:
        if plan.strategy == spec.name and is_default(plan):
            return plan
    return make_plan(inp, spec.name, spec.out_of_the_box(spec.options_of(options)), cost)


def compare_advice(rows: Sequence[CompareRow], framework: str, options=None) -> tuple[Advice, ...]:
    """One entry per framework of ``rows`` (``plan-buckets --compare``), the trace's
    ``framework`` first; the run's own buckets ("as run (model)") are its reference."""
    predicted = [(r.label, r.plan) for r in rows if not r.plan.measured and r.label != _RUN_ROW]
    run = next((r.plan for r in rows if r.label == _RUN_ROW), None)
    if not predicted:
        return ()
    inp, cost = predicted[0][1].inp, predicted[0][1].cost
    out = []
    if framework == "chainer":
        out.append(_chainer(next(p for label, p in predicted if p.strategy == "single")))
    for spec in _specs(framework, inp):
        default = _default_of(spec, predicted, inp, cost, options)
        key = _key(default)
        mine = [(label, p) for label, p in predicted if _key(p) == key and key is not None]
        if not mine:
            continue
        traced = framework in spec.frameworks
        against_run = traced and run is not None
        out.append(_entry(spec.title, key, mine, run if against_run else default, against_run, traced))
    return tuple(out)


def plan_advice(plan: BucketPlan, framework: str, options=None,
                run: Optional[BucketPlan] = None) -> tuple[Advice, ...]:
    """The advice of one plan (``plan-buckets`` without ``--compare``): the trace's own
    framework first (this plan where its settings are that framework's, else the best of
    that framework's own tuning), then this plan's framework where it is another one."""
    if plan.measured:
        return ()
    inp, cost = plan.inp, plan.cost
    out = []
    if framework == "chainer":
        out.append(_chainer(make_plan(inp, "single", {}, cost)))
    own = _key(plan)
    for spec in _specs(framework, inp):
        traced = framework in spec.frameworks
        if not traced:
            continue
        default = _default_of(spec, [(plan.strategy, plan)], inp, cost, options)
        if _key(default) == own:
            candidates = [(plan.strategy, plan)]
        else:
            rows = compare(inp, cost, options or {}, names=[spec.name])
            candidates = [(r.label, r.plan) for r in rows if _key(r.plan) == _key(default)]
        against_run = run is not None
        out.append(_entry(spec.title, _key(default), candidates, run if against_run else default,
                          against_run, True))
    if own is not None and all(a.framework != own for a in out):
        spec = next((s for s in _specs(framework, inp) if _key(_default_of(s, (), inp, cost, options)) == own), None)
        if spec is not None:
            default = _default_of(spec, [(plan.strategy, plan)], inp, cost, options)
            out.append(_entry(spec.title, own, [(plan.strategy, plan)], default, False, False))
    return tuple(out)
