"""Strategies as specs: the registry, the knob table, framework settings and compare rows
through the specs, and a new strategy as one spec."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Optional

import pytest

from tracecli.costs import resolve_cost_model
from tracecli.errors import PlanError
from tracecli.planning import (
    KNOBS, STRATEGIES, Grad, Kind, Knob, PlanInput, StrategySpec, compare,
    make_plan, predicted, spec_of,
)
from tracecli.planning.observed import RunBucket, as_run_plan
from tracecli.planning.base import Grouping
from tracecli.planning.plan import fixed_plan, is_default, settings_for
from tracecli.planning.spec import MAX_BYTES, SPARSE_AS_DENSE, Options
from tracecli.render.plans import compare_advice

MiB = 1 << 20
COST = resolve_cost_model(8, "25gbe")
SIZES = [4 * MiB, 8 * MiB, 30 * MiB, 2 * MiB, 512 * 1024, 64 * 1024]
INPUT = PlanInput(tuple(Grad(f"g{i}", n, "float32", n // 4, 1.0 + i, i) for i, n in enumerate(SIZES)),
                  2.0, 8.0)


def test_the_knob_table_is_the_cli_s_and_each_spec_owns_its_options_record():
    names = [k.name for k in KNOBS]
    assert names == ["max_bytes", "first_bucket_bytes", "cycle_ms", "spec",
                     "agg_small_grads_max_bytes", "agg_small_grads_max_group",
                     "megatron_bucket_size", "megatron_overlap_grad_reduce",
                     "megatron_distributed_optimizer", "megatron_grad_reduce_in_fp32",
                     "megatron_pad_buckets_for_high_nccl_busbw", "megatron_expert_dp",
                     "deepspeed_stage", "deepspeed_reduce_bucket_size", "deepspeed_overlap_comm",
                     "deepspeed_no_reduce_scatter", "deepspeed_communication_data_type",
                     "sparse_as_dense"]
    assert [k.flag for k in KNOBS] == ["--" + n.replace("_", "-") for n in names]
    # every spec reads knobs of the table, through a record of its own whose fields are them
    assert {k for spec in STRATEGIES.values() for k in spec.knobs} == set(KNOBS)
    for spec in STRATEGIES.values():
        record = spec.options()
        assert [f.name for f in dataclasses.fields(record)] == [k.name for k in spec.knobs]
        assert all(getattr(record, k.name) == k.default for k in spec.knobs)
        assert spec.options_of({k.name: k.default for k in KNOBS}) == record
    # the plan file holds the options its strategy reads
    doc = make_plan(INPUT, "ddp", {}, COST).to_json()
    assert "max_bytes" in doc and list(doc["options"]) == ["first_bucket_bytes", "sparse_as_dense"]
    assert make_plan(INPUT, "single", {}, COST).to_json()["options"] == {}


@pytest.mark.parametrize("knob_name,bad", [("max_bytes", 0), ("max_bytes", 1 << 51),
                                          ("cycle_ms", 0.0), ("cycle_ms", float("nan")),
                                          ("agg_small_grads_max_group", -1), ("spec", 3)])
def test_a_value_out_of_its_knob_s_bounds_is_refused_by_the_record(knob_name, bad):
    spec = next(s for s in STRATEGIES.values() if any(k.name == knob_name for k in s.knobs))
    with pytest.raises(PlanError, match=f"^{knob_name} must be "):
        spec.options_of({knob_name: bad})


def test_planning_never_imports_click():
    code = "import sys, tracecli.planning; sys.exit('click' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_registry_dispatch_and_its_errors():
    assert predicted() == [n for n in STRATEGIES if n != "observed"]
    assert spec_of("observed").from_run and spec_of("ddp").title == "PyTorch DDP"
    with pytest.raises(PlanError, match="unknown strategy 'nope'; use one of per-tensor, .*observed"):
        spec_of("nope")
    with pytest.raises(PlanError, match="unknown strategy 'nope'; use one of .*optimal$"):
        make_plan(INPUT, "nope", {}, COST)
    with pytest.raises(PlanError, match="not predicted"):
        make_plan(INPUT, "observed", {}, COST)


@pytest.mark.parametrize("name,framework", [
    ("ddp", "pytorch-ddp"), ("horovod", "horovod"), ("tf-spec", "tf_cnn_benchmarks"),
    ("optimal", "pytorch-ddp"), ("size", "pytorch-ddp"), ("single", "pytorch-ddp"),
    ("per-tensor", "pytorch-ddp"),
])
def test_framework_settings_are_the_specs(name, framework):
    plan = make_plan(INPUT, name, {}, COST)
    assert plan.settings == STRATEGIES[name].settings(plan) == settings_for(plan)
    assert plan.settings["framework"] == framework
    # knobs the framework reads show in its settings
    tuned = make_plan(INPUT, name, dict(max_bytes=8 * MiB, cycle_ms=2.0,
                                                   agg_small_grads_max_bytes=MiB), COST)
    text = {"ddp": "bucket_cap_mb=8)", "horovod": "HOROVOD_FUSION_THRESHOLD=8388608 HOROVOD_CYCLE_TIME=2",
            "tf-spec": "--agg_small_grads_max_bytes=1048576"}.get(name, "bucket_cap_mb_list=[")
    assert text in tuned.settings["text"]


def test_settings_of_the_run_and_of_a_strategy_unknown_here():
    buckets = [RunBucket((0, 1), 12 * MiB, "float32", 3.0, 3.0, 5.0),
               RunBucket((), 34 * MiB, "float32", 7.0, 7.0, 12.0)]
    run = as_run_plan(INPUT, buckets, COST)
    assert run.settings == {"framework": None, "text": "the run's own buckets"}
    whole = as_run_plan(INPUT, [buckets[0], buckets[1]._replace(members=(2, 3, 4, 5))], COST)
    assert whole.settings["text"].startswith("DistributedDataParallel(model, bucket_cap_mb_list=[12, ")
    other = fixed_plan(INPUT, [(0, 1, 2), (3, 4, 5)], "from-elsewhere", {}, COST)
    assert other.settings["bucket_cap_mb_list"] == [42.0, 2.5625]
    assert not is_default(other)


def test_compare_rows_are_the_registrys():
    options = dict(max_bytes=2 * MiB, cycle_ms=5.0)
    rows = {r.label: r.plan for r in compare(INPUT, COST, options)}
    specs = [STRATEGIES[n] for n in predicted()]
    expected = ([s.name for s in specs] + [f"{s.name} tuned" for s in specs if s.tuning]
                + [f"{s.name} default" for s in specs
                   if s.defaults is not None and not s.is_default(s.options_of(options))])
    assert sorted(rows) == sorted(expected)
    assert {s.name for s in specs if s.tuning} == {"ddp", "horovod", "tf-spec", "megatron",
                                                             "deepspeed"}
    for spec in specs:
        if spec.tuning is None:
            continue
        grid = [make_plan(INPUT, spec.name, o, COST)
                for o in spec.tuning(INPUT, spec.options_of(options))]
        best = min(p.timeline.iteration_ms for p in grid)
        assert rows[f"{spec.name} tuned"].timeline.iteration_ms == best
        assert rows[f"{spec.name} tuned"].options in {p.options for p in grid}
    for spec in specs:
        if spec.defaults is not None and not spec.is_default(spec.options_of(options)):
            assert is_default(rows[f"{spec.name} default"]) and not is_default(rows[spec.name])
    assert is_default(rows["megatron"])  # --max-bytes and --cycle-ms are not Megatron's knobs
    assert is_default(rows["deepspeed"])


@dataclasses.dataclass(frozen=True)
class PairsOptions(Options):
    max_bytes: Optional[int] = MAX_BYTES.field()
    sparse_as_dense: bool = SPARSE_AS_DENSE.field()


def _pairs(grads, options, cost) -> Grouping:
    return Grouping([tuple(range(i, min(i + 2, len(grads)))) for i in range(0, len(grads), 2)])


def test_a_new_strategy_is_one_spec(monkeypatch):
    def pairs_settings(plan):
        return {"framework": "pairs", "text": f"pairs(cap={plan.options.max_bytes})"}

    def pairs_tuning(inp, options):
        return [dataclasses.replace(options, max_bytes=m) for m in (MiB, 2 * MiB)]

    spec = StrategySpec("pairs", _pairs, PairsOptions, pairs_settings, pairs_tuning, "Pairs",
                        defaults=(MAX_BYTES,))
    monkeypatch.setitem(STRATEGIES, "pairs", spec)
    plan = make_plan(INPUT, "pairs", {}, COST)
    assert [b.members for b in plan.buckets] == [(0, 1), (2, 3), (4, 5)]
    assert plan.settings == {"framework": "pairs", "text": "pairs(cap=None)"} and is_default(plan)
    rows = compare(INPUT, COST, dict(max_bytes=4 * MiB))
    assert {"pairs", "pairs tuned", "pairs default"} <= {r.label for r in rows}
    advice = compare_advice(rows)
    k = next(i for i, line in enumerate(advice) if line.startswith("  Pairs: "))
    assert "default" in advice[k + 1]
    assert any(line.startswith("    pairs(cap=") for line in advice)


def test_knobs_are_click_free_descriptions():
    knob = Knob("depth", "--depth", Kind.COUNT, 2, "pairs: how deep.")
    assert dataclasses.asdict(knob)["default"] == 2 and knob.kind is Kind.COUNT
