"""Every hint names an option the command has (issue 24 item 5): each command of
``benchmarks/output_diff.py`` (every command on the samples, errors included) and a few
more that take the fallback paths is run, and every ``--option`` its messages name (standard
error, the plans' notes, the advice's reasons) must be one that command accepts."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from conftest import FIXTURES, VGG, run
from tracecli.cli import cli

ROOT = Path(__file__).resolve().parents[2]
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*(?![\w])")


def _commands() -> list[list[str]]:
    spec = importlib.util.spec_from_file_location("output_diff", ROOT / "benchmarks" / "output_diff.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    K = FIXTURES / "kineto"
    more = [["plan-buckets", str(K / "unused_allused.json.gz")],  # the trace fit fails
            ["plan-buckets", str(K / "unused_some.json.gz"), "--strategy", "ddp"],
            ["plan-buckets", str(K / "mlp_default.json.gz"), "--gpus", "64", "--compare"],
            ["plan-buckets", str(VGG), "--strategy", "ddp", "--max-bytes", "25MB"],
            ["plan-buckets", str(VGG), "--max-bytes", "25"],
            ["plan-buckets", str(VGG), "--calibration", "x.json", "--network", "10gbe"],
            ["plan-buckets", str(VGG), "--nodes", "2"]]
    return [c for c in module.commands() if not _session(c)] + more


def _session(cmd: list[str]) -> bool:
    """Commands that read the directory's session (run elsewhere) or write files."""
    return len(cmd) <= 2 and cmd[0] in ("status", "replay", "plan-buckets") or \
        any("{out}" in a for a in cmd)


def _accepted(command: str) -> set[str]:
    return {o for p in cli.commands[command].params for o in p.opts if o.startswith("--")}


def _said(stdout: str, stderr: str) -> str:
    """What a command said to the user beyond what it prints to paste."""
    text = stderr
    try:
        doc = json.loads(stdout)
    except ValueError:
        return text + "\n" + "\n".join(l for l in stdout.splitlines() if l.startswith("note:"))
    docs = doc if isinstance(doc, list) else [doc]
    for d in docs:
        if isinstance(d, dict):
            text += "\n" + "\n".join(d.get("notes", []))
            text += "\n" + "\n".join(a["why"] for a in d.get("advice", []))
    return text


@pytest.mark.slow
def test_every_hint_names_an_option_of_its_command():
    wrong = []
    for cmd in _commands():
        result = run(*cmd)
        named = set(OPTION.findall(_said(result.stdout, result.stderr)))
        bad = named - _accepted(cmd[0]) - {"--help"}
        if bad:
            wrong.append((" ".join(cmd), sorted(bad)))
    assert not wrong, wrong


def test_a_failed_trace_fit_names_no_calibrate_option():
    """plan-buckets has no --max-size nor --iters (calibrate's): the fit's failure says what
    plan-buckets can do."""
    result = run("plan-buckets", FIXTURES / "kineto" / "unused_allused.json.gz")
    assert "cannot fit the trace's all-reduces" in result.stderr
    assert not set(OPTION.findall(result.stderr)) - _accepted("plan-buckets")
