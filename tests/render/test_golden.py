"""Golden files for the rendered plan and compare views: the samples through the CLI at 80
columns with colour off (COLUMNS=80, NO_COLOR=1), standard output byte for byte, sample paths
written as SAMPLES/... .

A deliberate change to a view is recorded by rewriting the goldens and reviewing the diff:

    TRACECLI_UPDATE_GOLDEN=1 PYTHONPATH=$PWD python -m pytest -q tests/render/test_golden.py \\
        tests/render/test_golden_replay.py tests/cli/test_cli.py -k golden
    git diff tests/golden/

Replay and calibration views, rendered from hand-written reports, are in test_golden_replay.py.
"""

from __future__ import annotations

import pytest

from conftest import DDP_GPU, FIXTURES, RESNET, SAMPLES, VGG, check_golden, run

VIEW_ENV = {"COLUMNS": "80", "NO_COLOR": "1"}

CASES = [
    # (golden file, arguments, a phrase stderr must hold or None for silence)
    ("plan_vgg_32k.txt", ["plan-buckets", VGG, "--max-bytes", "32k"], None),
    ("plan_vgg_ddp_top3.txt", ["plan-buckets", VGG, "--strategy", "ddp", "--top", "3"], None),
    ("compare_resnet_horovod.txt", ["plan-buckets", RESNET, "--backward-ms", "120", "--gpus", "64",
                                    "--network", "25gbe", "--compare"], None),
    ("compare_mlp.txt", ["plan-buckets", FIXTURES / "mlp_chainer.txt", "--compare"], None),
    ("plan_ddp_observed.txt", ["plan-buckets", DDP_GPU, "--strategy", "observed"],
     "the alpha-beta fit to the trace's all-reduces is poor"),
]


@pytest.mark.parametrize("name,args,notice", CASES, ids=[c[0] for c in CASES])
def test_view_golden(name, args, notice):
    result = run(*args, env=VIEW_ENV)
    assert result.exit_code == 0, result.output
    if notice is None:
        assert result.stderr == ""
    else:
        assert notice in result.stderr
    text = result.stdout.replace(str(SAMPLES), "SAMPLES").replace(str(FIXTURES), "FIXTURES")
    check_golden(name, text)
