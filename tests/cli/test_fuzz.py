"""Seeded mutants of every input format hold tracecli to its contract (tests/fuzzing.py):
exit 0 with valid JSON, or exit 2 with one line naming the file; never exit 1, never
more than 10 s, never more than 1 GB. benchmarks/fuzz.py runs 100,000."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fuzzing import HERE, seeds

pytestmark = pytest.mark.slow  # thousands of mutated inputs, each through the CLI

PER_FORMAT = 2000


@pytest.mark.parametrize("kinds,per_format", [
    (["chainer", "tf-schedule", "kineto"], PER_FORMAT),
    (["plan", "op-times", "calibration"], PER_FORMAT),
    (["nccl-tests", "nccl-log", "run"], PER_FORMAT // 4),
], ids=["traces", "json-files", "cluster-and-run"])
def test_mutants_keep_the_contract(kinds, per_format):
    count = per_format * len(kinds)
    out = subprocess.run([sys.executable, str(HERE / "fuzzing.py"), "--count", str(count),
                          "--seed", "20261122", "--kinds", *kinds],
                         capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["mutants"] == count and summary["failed"] == 0, summary["failures"][:3]
    assert summary["slowest_s"] < 10 and summary["peak_mb"] < 1024, summary


def test_every_format_has_seeds():
    assert {"chainer", "tf-schedule", "kineto", "nccl-tests", "nccl-log", "run"} <= set(seeds())
