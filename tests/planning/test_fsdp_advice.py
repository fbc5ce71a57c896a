"""FSDP's ``--compare`` rows and advice (issue 27 item 3), on a synthetic 16-block FSDP2 run
(``fsdp_synthetic``): the tuned row is the fastest configuration tried within the memory
budget and never slower than FSDP's defaults where those fit; the verdict is ``set`` only
past the model's error (or when the defaults exceed the budget); a budget nothing meets is
one line, exit 2."""

from __future__ import annotations

import json

import pytest

from conftest import assert_error, run
from fsdp_synthetic import write_trace

from tracecli.costs.error import ErrorBand
from tracecli.parsers import load
from tracecli.pipeline import ComputeRequest, CostRequest, prepare
from tracecli.planning.fsdp.options import Fsdp2Options
from tracecli.planning.fsdp.tune import GIB, candidates, compare_rows
from tracecli.planning.plan import make_plan

SLOW = ["--alpha-us", "50", "--bandwidth-gbps", "0.5"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("fsdp") / "fsdp2_16.json.gz", 16, world=8)


class Banded:
    """A cost model with a known error band everywhere (``pct`` both ways)."""

    def __init__(self, base, pct: float):
        self.base, self.pct = base, pct

    def __getattr__(self, name):
        return getattr(self.base, name)

    def error(self, kind, nbytes):
        return ErrorBand(-self.pct, self.pct, "test")

    def on(self, gpus):
        return Banded(self.base.on(gpus), self.pct)


def prepared(trace):
    return prepare(load(str(trace)), ComputeRequest(),
                   CostRequest(alpha_us=50.0, bandwidth_gbps=0.5))


def test_tuned_is_the_fastest_within_the_budget_and_beats_the_defaults(trace):
    p = prepared(trace)
    plans = [make_plan(p.inp, "fsdp2", o, p.cost) for o in candidates("fsdp2", p.inp, Fsdp2Options())]
    peaks = sorted({pl.fsdp.memory.peak for pl in plans})
    assert len(peaks) > 2  # the grid trades memory for time
    budget = peaks[len(peaks) // 2] / GIB
    (_, tuned), (_, default) = compare_rows("fsdp2", p.inp, Fsdp2Options(memory_gib=budget), p.cost)
    fitting = [pl for pl in plans if pl.fsdp.memory.peak <= budget * GIB]
    assert tuned.fsdp.memory.peak <= budget * GIB
    assert tuned.timeline.iteration_ms == pytest.approx(min(pl.timeline.iteration_ms for pl in fitting))
    if default.fsdp.memory.peak <= budget * GIB:
        assert tuned.timeline.iteration_ms <= default.timeline.iteration_ms + 1e-9


def test_resharding_after_forward_holds_less(trace):
    p = prepared(trace)
    keep = make_plan(p.inp, "fsdp2", {"fsdp_reshard_after_forward": "false"}, p.cost)
    free = make_plan(p.inp, "fsdp2", {"fsdp_reshard_after_forward": "true"}, p.cost)
    assert keep.fsdp.memory.peak > free.fsdp.memory.peak
    assert sum(b.collective.value == "allgather" for b in keep.buckets) == 17  # no re-gather
    assert sum(b.collective.value == "allgather" for b in free.buckets) == 33


def test_the_verdict_follows_the_models_error(trace):
    p = prepared(trace)
    precise, rough = Banded(p.cost, 0.0001), Banded(p.cost, 50.0)
    (_, tuned), _ = compare_rows("fsdp2", p.inp, Fsdp2Options(), precise)
    a = tuned.fsdp.advice
    assert a.error_ms is not None and a.gain_ms > a.error_ms and a.verdict == "set", a
    assert a.paste == tuned.fsdp.paste
    (_, tuned), _ = compare_rows("fsdp2", p.inp, Fsdp2Options(), rough)
    a = tuned.fsdp.advice
    assert a.verdict == "keep-defaults" and "inside the model's error" in a.why
    (_, tuned), _ = compare_rows("fsdp2", p.inp, Fsdp2Options(), p.cost)  # a preset
    assert tuned.fsdp.advice.verdict == "keep-defaults" and tuned.fsdp.advice.error_ms is None


def test_a_faster_plan_over_the_budget_is_not_the_tuned_one(trace):
    """Keeping blocks unsharded after forward is faster here and holds more: with the
    defaults' memory as the budget, the tuned plan reshards."""
    p = prepared(trace)
    default = make_plan(p.inp, "fsdp2", {"fsdp_reshard_after_forward": "true",
                                         "fsdp_prefetch": "implicit"}, p.cost)
    keep = make_plan(p.inp, "fsdp2", {"fsdp_reshard_after_forward": "false",
                                      "fsdp_prefetch": "implicit"}, p.cost)
    assert keep.timeline.iteration_ms < default.timeline.iteration_ms
    assert keep.fsdp.memory.peak > default.fsdp.memory.peak
    budget = default.fsdp.memory.peak / GIB
    (_, tuned), _ = compare_rows("fsdp2", p.inp, Fsdp2Options(memory_gib=budget), p.cost)
    assert tuned.fsdp.memory.peak <= default.fsdp.memory.peak
    assert all(u.reshard_after_forward is not False for u in tuned.fsdp.units[1:])
    (_, free), _ = compare_rows("fsdp2", p.inp, Fsdp2Options(), p.cost)
    assert free.timeline.iteration_ms <= keep.timeline.iteration_ms


def test_compare_json_carries_fsdp_advice(trace):
    result = run("plan-buckets", trace, "--compare", "--json", *SLOW)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    labels = [r["label"] for r in doc["compare"]]
    assert {"fsdp2", "fsdp2 tuned", "fsdp2 default", "ddp", "as run (model)"} <= set(labels)
    (advice,) = doc["fsdp_advice"]
    assert set(advice) >= {"framework", "verdict", "best_ms", "default_ms", "gain_ms",
                           "error_ms", "paste", "why"}
    assert advice["verdict"] in ("set", "keep-defaults")
    text = run("plan-buckets", trace, "--compare", *SLOW).stdout
    assert "PyTorch FSDP2 tuned" in text and "fully_shard(model" in text


def test_a_budget_no_wrapping_meets_is_one_line(trace):
    result = run("plan-buckets", trace, "--compare", "--memory-gib", "0.000001")
    assert_error(result, "tracecli: ", "--memory-gib", "the least any needs")
