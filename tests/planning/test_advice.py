"""Advice as data (issue 24 items 2-3, issue 22 item 3): one record per framework shown,
decided in planning, in ``--json`` as ``advice`` and rendered as the same records in the
text; the trace's framework first; golden files of the block at 80 columns under each
verdict."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, RESNET, RESNET_SIZES, VGG, check_golden, run

KINETO = FIXTURES / "kineto"
VIEW_ENV = {"COLUMNS": "80", "NO_COLOR": "1"}
KEYS = {"framework", "verdict", "best_ms", "default_ms", "gain_ms", "error_ms", "paste", "why"}
DGX = ("--gpus", "64", "--platform", "dgx-h100", "--nodes", "8")

GOLDEN = [
    # (golden file, arguments, the verdicts the block holds, framework first)
    ("advice_set.txt", [RESNET, "--backward-ms", "120", *DGX], ["set", "keep-defaults"]),
    ("advice_keep_inside_error.txt", [KINETO / "mlp_cap1.json.gz", "--strategy", "optimal"],
     ["keep-defaults"]),
    ("advice_keep_error_unknown.txt", [RESNET, "--backward-ms", "120", "--gpus", "64",
                                       "--network", "25gbe"], ["keep-defaults", "keep-defaults"]),
    ("advice_keep_slower.txt", [RESNET, "--backward-ms", "120", *DGX, "--strategy", "horovod",
                                "--max-bytes", "16MiB", "--cycle-ms", "3"], ["keep-defaults"]),
    ("advice_nothing_to_set.txt", [VGG, "--strategy", "ddp"], ["keep-defaults", "keep-defaults"]),
]


def _block(stdout: str) -> str:
    return stdout[stdout.index("What to set"):]


@pytest.mark.parametrize("name,args,verdicts", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_advice_block_golden(name, args, verdicts):
    result = run("plan-buckets", *args, env=VIEW_ENV)
    assert result.exit_code == 0, result.output
    block = _block(result.stdout)
    check_golden(name, block)
    records = json.loads(run("plan-buckets", *args, "--json").stdout)["advice"]
    assert [a["verdict"] for a in records] == verdicts
    _renders_the_records(block, records)


def _renders_the_records(block: str, records: list[dict]) -> None:
    """The text is the records: each one's paste on lines of its own (a line too long broken
    only where it pastes the same: its comment above it, a call after a comma inside its
    brackets, shell words with a backslash), its why, in order; every line within 80 columns."""
    flat = " ".join(block.replace(" \\\n", " ").split())
    at = 0
    for a in records:
        for line in a["paste"].splitlines():
            code, _, comment = line.partition("  # ")
            if len(line) + 4 <= 80:
                assert f"\n    {line}\n" in block  # fits: whole, as it is
            else:
                assert " ".join(code.split()) in flat and (not comment or f"# {comment}" in flat)
        k = flat.index(" ".join(a["why"].split()), at)
        assert k >= at
        at = k
    assert all(len(line) <= 80 for line in block.splitlines())


CASES = [
    [KINETO / "resnet18_default.json.gz", "--compare"],
    [KINETO / "transformer_default.json.gz"],
    [KINETO / "mlp_default.json.gz", "--strategy", "optimal", "--gpus", "64"],
    [RESNET, "--sizes", RESNET_SIZES, "--backward-ms", "100", "--compare"],
    [VGG, "--compare", *DGX],
    [FIXTURES / "sparse" / "embed_tf.txt", "--backward-ms", "50"],
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(str(x).split("/")[-1] for x in a))
def test_the_contract(args):
    doc = json.loads(run("plan-buckets", *args, "--json").stdout)
    advice = doc["advice"]
    assert advice
    for a in advice:
        assert KEYS <= set(a)
        assert a["verdict"] in ("set", "keep-defaults")
        assert a["gain_ms"] is None or abs(a["default_ms"] - a["best_ms"] - a["gain_ms"]) < 1e-9
        if a["verdict"] == "set":  # only a gain beyond a known error
            assert a["error_ms"] is not None and a["gain_ms"] > a["error_ms"] >= 0
            assert a["paste"]
        elif a["reference"] == "run":
            assert a["paste"] == ""  # keep what the run does: nothing to paste
    text = run("plan-buckets", *args, env=VIEW_ENV).stdout
    _renders_the_records(_block(text), advice)


@pytest.mark.parametrize("args,first", [
    ([KINETO / "mlp_default.json.gz"], "pytorch-ddp"),
    ([RESNET, "--backward-ms", "100"], "horovod"),
    ([VGG], "chainermn"),
    ([FIXTURES / "sparse" / "embed_tf.txt", "--backward-ms", "50"], "tf_cnn_benchmarks"),
])
def test_the_trace_framework_comes_first(args, first):
    for extra in ([], ["--compare"]):
        advice = json.loads(run("plan-buckets", *args, *extra, "--json").stdout)["advice"]
        assert advice[0]["framework"] == first and advice[0]["trace_framework"]
        assert not any(a["trace_framework"] for a in advice[1:])
        text = run("plan-buckets", *args, *extra, env=VIEW_ENV).stdout
        heads = [line for line in _block(text).splitlines() if line.startswith("  ") and
                 not line.startswith("    ")]
        assert "(the trace's framework)" in heads[0]
        assert all(h.startswith("  If you used ") for h in heads[1:])


def test_no_default_is_best_beside_another_setting():
    """A keep verdict against the defaults pastes the defaults (or nothing), never another
    setting; the faster setting it did not advise is in the JSON as a candidate only."""
    for args in CASES:
        for a in json.loads(run("plan-buckets", *args, "--json").stdout)["advice"]:
            if a["verdict"] == "keep-defaults" and a["reference"] == "defaults" and a["paste"]:
                assert "default" in a["paste"] or a["paste"] in {
                    "export HOROVOD_FUSION_THRESHOLD=134217728 HOROVOD_CYCLE_TIME=1",
                    "--all_reduce_spec=nccl", '"zero_optimization": {"stage": 2}',
                    "DistributedDataParallelConfig()\n# overlap_grad_reduce off: one bucket per "
                    "buffer, reduced after backward"}, a


def test_an_unknown_error_never_sets():
    advice = json.loads(run("plan-buckets", RESNET, "--backward-ms", "120", "--gpus", "64",
                            "--network", "25gbe", "--compare", "--json").stdout)["advice"]
    assert all(a["error_ms"] is None and a["verdict"] == "keep-defaults" for a in advice)
    assert any(a["gain_ms"] > 0 and a["candidate"] for a in advice)
    assert all("error is unknown" in a["why"] for a in advice if a["gain_ms"] > 0)
