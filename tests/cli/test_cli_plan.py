"""plan-buckets through the CLI: JSON contract, files, compare, errors."""

from __future__ import annotations

import json

import pytest

from conftest import RESNET, VGG, assert_error, run

PLAN_KEYS = {"strategy", "max_bytes", "gpus", "cost_model", "buckets", "predicted"}
BUCKET_KEYS = {"index", "tensors", "bytes", "ready_ms", "start_ms", "end_ms"}


def plan(*args):
    result = run("plan-buckets", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_json_contract_vgg():
    doc = plan(VGG, "--max-bytes", "32k", "--gpus", "4")
    assert PLAN_KEYS <= set(doc) and doc["strategy"] == "size" and doc["max_bytes"] == 32768
    assert doc["gpus"] == 4 and doc["cost_model"]["gpus"] == 4
    names = [n for b in doc["buckets"] for n in b["tensors"]]
    assert len(names) == len(set(names)) == 38 and names[0] == "/predictor/fc8/W"
    for b in doc["buckets"]:
        assert BUCKET_KEYS <= set(b)
        assert b["ready_ms"] <= b["start_ms"] <= b["end_ms"]
    assert [b["index"] for b in doc["buckets"]] == list(range(len(doc["buckets"])))
    p = doc["predicted"]
    assert {"iteration_ms", "compute_ms", "exposed_comm_ms"} <= set(p)
    assert p["exposed_comm_ms"] == pytest.approx(p["iteration_ms"] - p["compute_ms"])
    assert p["iteration_ms"] >= p["lower_bound_ms"]


def test_plan_resnet_strategies():
    for strategy in ("per-tensor", "single", "size", "ddp", "horovod", "tf-spec", "optimal"):
        doc = plan(RESNET, "--backward-ms", "120", "--strategy", strategy, "--network", "25gbe")
        assert sum(len(b["tensors"]) for b in doc["buckets"]) == 214, strategy
    assert len(plan(RESNET, "--backward-ms", "120", "--strategy", "single")["buckets"]) == 1
    assert len(plan(RESNET, "--backward-ms", "120", "--strategy", "per-tensor")["buckets"]) == 214


def test_plan_is_deterministic():
    args = ("plan-buckets", VGG, "--strategy", "optimal", "--json")
    assert run(*args).stdout == run(*args).stdout


def test_compare_orders_best_first_and_names_settings():
    result = run("plan-buckets", RESNET, "--backward-ms", "120", "--gpus", "64", "--network",
                 "10gbe", "--compare", "--json")
    rows = json.loads(result.stdout)["compare"]
    times = [r["iteration_ms"] for r in rows]
    assert times == sorted(times) and rows[0]["strategy"] == "optimal"
    labels = {r["label"] for r in rows}
    assert {"ddp tuned", "horovod tuned", "tf-spec tuned", "optimal", "ddp"} <= labels
    settings = {r["label"]: r["settings"] for r in rows}
    assert "bucket_cap_mb" in settings["ddp tuned"]
    assert {"HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME"} <= set(settings["horovod tuned"])
    assert "all_reduce_spec" in settings["tf-spec tuned"]
    assert "bucket_cap_mb_list" in settings["optimal"]
    table = run("plan-buckets", RESNET, "--backward-ms", "120", "--compare")
    assert table.exit_code == 0 and "ddp tuned" in table.stdout


def test_out_and_chrome_trace_files(tmp_path):
    out, chrome = tmp_path / "plan.json", tmp_path / "trace.json"
    result = run("plan-buckets", VGG, "--strategy", "ddp", "--out", out, "--chrome-trace", chrome)
    assert result.exit_code == 0
    assert json.loads(out.read_text())["strategy"] == "ddp"
    events = json.loads(chrome.read_text())["traceEvents"]
    assert {e["tid"] for e in events if e["ph"] == "X"} == {1, 2}
    assert all({"ts", "dur", "name"} <= set(e) for e in events if e["ph"] == "X")
    assert_error(run("plan-buckets", VGG, "--out", out), str(out), "--force")
    assert run("plan-buckets", VGG, "--out", out, "--force").exit_code == 0


def test_calibration_profile_is_used(tmp_path):
    profile = tmp_path / "cal.json"
    profile.write_text(json.dumps({"format": "tracecli-calibration", "version": 1, "backend": "gloo",
                                   "gpus": 2, "algorithm": "ring", "alpha_us": 30.0,
                                   "bandwidth_gbps": 1.5, "fit": {"r2": 0.99, "mape_pct": 3.0},
                                   "points": []}))
    doc = plan(VGG, "--calibration", profile, "--gpus", "2")
    assert doc["cost_model"]["alpha_us"] == 30.0 and doc["cost_model"]["bandwidth_gbps"] == 1.5
    profile.write_text("{}")
    assert_error(run("plan-buckets", VGG, "--calibration", profile), f"{profile}:1:", "calibrate")


@pytest.mark.parametrize("args,words", [
    (["--max-bytes", "32q"], ["unknown size suffix", "KiB"]),
    (["--max-bytes", "-5"], ["not a size"]),
    (["--strategy", "nope"], ["per-tensor", "optimal"]),
    (["--network", "wifi"], ["nvlink-h100", "10gbe"]),
    (["--gpus", "0"], ["0"]),
])
def test_usage_errors(args, words):
    result = run("plan-buckets", VGG, *args)
    assert result.exit_code == 2
    for word in words:
        assert word in result.stderr


def test_plan_errors_are_one_line():
    assert_error(run("plan-buckets", RESNET), str(RESNET), "--backward-ms")
    assert_error(run("plan-buckets", VGG, "--strategy", "tf-spec", "--spec", "pscpu:32k"),
                 "tracecli: ", "malformed")
    assert_error(run("plan-buckets", VGG, "--calibration", "x.json", "--network", "10gbe"),
                 "tracecli: ", "not both")


@pytest.mark.parametrize("columns", ["80", "100"])
def test_advice_is_whole_and_names_readable(columns):
    from click.testing import CliRunner

    from tracecli.cli import cli

    def show(*args):
        result = CliRunner(env={"COLUMNS": columns, "NO_COLOR": "1"}).invoke(cli, [str(a) for a in args])
        assert result.exit_code == 0, result.output
        assert "…" not in result.stdout  # nothing cut with an ellipsis
        return result.stdout.splitlines()

    lines = show("plan-buckets", VGG, "--compare", "--gpus", "64", "--network", "25gbe")
    settings = [l.strip() for l in lines if l.startswith("    ")]
    assert any(l.startswith("DistributedDataParallel(model, bucket_cap_mb=") and l.endswith(")")
               for l in settings)
    assert any(l.startswith("export HOROVOD_FUSION_THRESHOLD=") and "HOROVOD_CYCLE_TIME=" in l
               for l in settings)
    caps = [l for l in settings if "bucket_cap_mb_list=[" in l]
    assert all(c.endswith("])  # torch >= 2.13") and "..." not in c for c in caps)
    # per-bucket caps are advice only where they beat the best single cap
    assert caps or "no better than the best bucket_cap_mb: nothing more to set" in settings
    k = next(i for i, l in enumerate(lines) if l.startswith("  PyTorch DDP:"))
    assert "default" in lines[k + 1]
    advice = lines[next(i for i, l in enumerate(lines) if l.startswith("What to set")):]
    pasted = {l for l in advice if l.startswith("    ") and ("(" in l or "=" in l)}
    assert all(len(l) <= 80 for l in advice if l not in pasted)  # prose whole at 80 columns
    lines = show("inspect", VGG, "--per-gradient")
    assert any("/predictor/conv5_4/W" in l for l in lines)
    lines = show("plan-buckets", VGG, "--strategy", "ddp")
    assert any("/predictor/fc8/W" in l for l in lines)
    assert not any(" 1 buckets" in l or " 1 GPUs" in l for l in lines)
    # a long step (seconds): every time in the bucket table still shows whole
    slow = ("plan-buckets", VGG, "--backward-ms", "12000", "--network", "10gbe")
    text = "\n".join(show(*slow))
    doc = json.loads(run(*slow, "--json").stdout)
    for b in doc["buckets"]:
        for key in ("ready_ms", "start_ms", "end_ms", "duration_ms"):
            assert f"{b[key]:,.3f}" in text, (key, b[key])


@pytest.mark.parametrize("text,nbytes", [("32mb", 32_000_000), ("32MB", 32_000_000), ("32m", 32 << 20),
                                         ("2mib", 2 << 20), ("1Gb", 10**9), ("64K", 64 << 10)])
def test_size_suffixes_in_any_case(text, nbytes):
    from tracecli.units import parse_size

    assert parse_size(text) == nbytes


def test_a_size_without_its_unit_is_warned():
    """--max-bytes 25 (bucket_cap_mb=25 in mind) plans 25-byte buckets: said, with the fix."""
    result = run("plan-buckets", VGG, "--max-bytes", "25")
    assert result.exit_code == 0
    assert "--max-bytes 25 is 25 bytes; sizes take a unit: 25MiB" in result.stderr
    quiet = run("plan-buckets", VGG, "--max-bytes", "25MiB")
    assert "sizes take a unit" not in quiet.stderr
