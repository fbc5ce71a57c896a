"""Issue 17 items 3, 4, 6, 7 on real traces: the A100 sample (no shapes), the torch 2.13
CPU Kineto fixtures (gloo, 2 ranks) and the Horovod ResNet-50 op list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracecli.cli import cli

ROOT = Path(__file__).resolve().parents[2]
A100 = ROOT / "sample_traces" / "resnet50_ddp_nccl_2xa100.json.gz"
HOROVOD = ROOT / "sample_traces" / "resnet50_horovod_tf.txt"
HOROVOD_SIZES = ROOT / "sample_traces" / "resnet50_horovod_tf.sizes.json"
VGG = ROOT / "sample_traces" / "vgg19_chainer.txt"
KINETO = ROOT / "tests" / "fixtures" / "kineto"


def run(*args, code=0):
    result = CliRunner(env={"COLUMNS": "80", "NO_COLOR": "1"}).invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


# item 3 -------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [("--max-bytes", "32k"), ("--compare",)])
def test_no_shapes_says_what_works(extra):
    err = run("plan-buckets", A100, *extra, code=2).stderr
    assert "record_shapes=True" in err
    assert "--strategy observed" in err and "--sizes FILE" in err


def test_observed_counts_the_trace_gradients_and_stays_above_its_bound():
    out = " ".join(run("plan-buckets", A100, "--strategy", "observed").stdout.split())
    assert "5 buckets of 161 gradients" in out and "sizes known per bucket only" in out
    assert "5 buckets for 5 gradients" not in out
    import re

    found = re.search(r"iteration ([\d.]+) ms = compute ([\d.]+) ms .* lower bound ([\d.]+) ms "
                      r"\(compute alone.*this run is ([\d.]+)x of it", out)
    iteration, compute, bound, ratio = map(float, found.groups())
    assert bound == compute and iteration >= bound
    assert ratio == pytest.approx(iteration / bound, abs=0.001)


@pytest.mark.parametrize("trace", sorted(t for t in KINETO.glob("*.json.gz")
                                          if t.name != "mlp_noshapes.json.gz"),  # --compare refuses
                         ids=lambda p: p.name)
def test_no_row_is_faster_than_its_own_bound(trace):
    from tracecli.pipeline import ComputeRequest, CostRequest, compare_trace
    from tracecli.parsers import load

    for gpus in (None, 64):
        planned = compare_trace(load(str(trace)), {}, ComputeRequest(),
                                CostRequest(gpus))
        for row in planned.rows:
            assert row.plan.timeline.iteration_ms >= row.plan.lower_bound_ms - 1e-9, row.label


# item 4 -------------------------------------------------------------------------------

def test_a_measured_plan_is_at_the_run_world_size():
    result = run("plan-buckets", A100, "--strategy", "observed", "--gpus", "8")
    assert "on 2 GPUs — measured" in result.stdout.replace("\n", " ")
    assert "on 8 GPUs" not in result.stdout
    assert "--gpus 8 ignored" in result.stderr


def test_compare_at_another_size_compares_predictions_only():
    result = run("plan-buckets", KINETO / "mlp_default.json.gz", "--compare", "--gpus", "64")
    out = " ".join(result.stdout.split())
    assert "as run (measured)" not in out and "as run (model)" in out
    assert "predicted by a model measured on 2 ranks" in out
    assert "used on 64 ranks: the ring formula fitted on 2 ranks extrapolates" in out
    assert "ran on 2 ranks; predicting 64 ranks extrapolates" in " ".join(result.stderr.split())
    assert "the measurement is not compared" in " ".join(result.stderr.split())


# item 6 -------------------------------------------------------------------------------

def _advice(result):
    lines = result.stdout.splitlines()
    return lines[next(i for i, l in enumerate(lines) if l.startswith("What to set")):]


def _records(*args):
    return json.loads(run("plan-buckets", *args, "--json").stdout)["advice"]


def test_a_gain_inside_the_fit_error_keeps_the_run():
    """(Issue 24 moved the verdict into planning: a record per framework.)"""
    advice = _advice(run("plan-buckets", KINETO / "mlp_cap1.json.gz", "--compare"))
    text = " ".join(" ".join(advice).split())
    assert "inside the model's error of ±" in text and "keep the run's own buckets" in text
    ddp = _records(KINETO / "mlp_cap1.json.gz", "--compare")[0]
    assert ddp["framework"] == "pytorch-ddp" and ddp["reference"] == "run"
    assert ddp["verdict"] == "keep-defaults" and 0 < ddp["gain_ms"] <= ddp["error_ms"]
    assert ddp["paste"] == ""  # against the run's own settings: nothing to paste
    assert all(len(l) <= 80 for l in advice if not l.startswith("    ") or "±" in l)


def test_a_gain_beyond_the_error_is_said_so():
    args = (VGG, "--compare", "--gpus", "64", "--platform", "dgx-h100", "--nodes", "8")
    beyond = [a for a in _records(*args) if a["verdict"] == "set"]
    assert beyond and all(a["gain_ms"] > a["error_ms"] for a in beyond)
    text = " ".join(run("plan-buckets", *args).stdout.split())
    assert "beyond the model's error of ±" in text


def test_the_run_is_compared_under_the_same_model():
    out = run("plan-buckets", KINETO / "mlp_default.json.gz", "--compare").stdout
    assert "vs run" in out and "(model)" in out
    row = next(l for l in out.splitlines() if l.strip().startswith("as run (model)"))
    assert row.rstrip().endswith("+0.0%")


def test_a_preset_says_its_error_is_unknown():
    text = " ".join(" ".join(_advice(run("plan-buckets", HOROVOD, "--sizes", HOROVOD_SIZES,
                                         "--backward-ms", "100", "--compare"))).split())
    assert "the model's error is unknown (the nvlink-h100 preset: typical published figures" in text
    assert "not shown to be real" in text


# item 7 -------------------------------------------------------------------------------

def _heads(advice):
    return [l for l in advice if l.startswith("  ") and not l.startswith("    ")
            and l.rstrip().endswith(("set", "keep the defaults", "keep the run's own settings",
                                     "nothing to set"))]


def test_horovod_lists_lead_with_horovod():
    advice = _advice(run("plan-buckets", HOROVOD, "--sizes", HOROVOD_SIZES, "--backward-ms", "100",
                         "--compare"))
    assert _heads(advice)[0].startswith("  Horovod (the trace's framework):")
    assert all(h.startswith("  If you used ") for h in _heads(advice)[1:])
    out = run("plan-buckets", HOROVOD, "--sizes", HOROVOD_SIZES, "--backward-ms", "100").stdout
    tail = out[out.index("lower bound"):]
    assert tail.index("Horovod (the trace's framework)") < tail.index("If you used PyTorch DDP")


def test_pytorch_traces_lead_with_ddp():
    advice = _advice(run("plan-buckets", KINETO / "mlp_default.json.gz", "--compare"))
    assert _heads(advice)[0].startswith("  PyTorch DDP (the trace's framework):")


def test_the_framework_comes_from_the_trace_abilities():
    from tracecli.parsers import LoadOptions, load

    assert load(str(KINETO / "mlp_default.json.gz")).abilities.framework == "pytorch"
    options = LoadOptions(sizes=str(HOROVOD_SIZES))
    assert load(str(HOROVOD), options).abilities.framework == "horovod"


def test_per_bucket_caps_are_advice_only_where_they_beat_one_cap_beyond_the_error():
    """The optimum's per-bucket list is pasted only where no single bucket_cap_mb comes
    within the model's error of it (issue 24: simplest setting within the error)."""
    for args in [(VGG, "--compare", "--gpus", "64", "--platform", "dgx-h100", "--nodes", "8"),
                 (KINETO / "transformer_default.json.gz", "--compare")]:
        ddp = next(a for a in _records(*args) if a["framework"] == "pytorch-ddp")
        doc = json.loads(run("plan-buckets", *args, "--json").stdout)["compare"]
        tuned = next(r for r in doc if r["label"] == "ddp tuned")["iteration_ms"]
        if "bucket_cap_mb_list" in (ddp["paste"] or ddp["candidate"] or ""):
            assert ddp["error_ms"] is not None and tuned - ddp["best_ms"] > ddp["error_ms"]
