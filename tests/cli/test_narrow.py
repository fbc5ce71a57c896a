"""Every command's text output read at 80 columns: nothing over 80 (settings to paste
excepted), no value split or cut (issue 26 item 1).

Each command runs once through click's runner; what it prints through the console is
rendered twice, at 80 columns and at 1,000 (where nothing wraps), and its notices are
wrapped at ``COLUMNS=80``. A line of the 80-column rendering fails when:

- it is over 80 characters, unless it is a setting to paste (an advice line whose text,
  stripped, holds a framework setting: ``NAME=VALUE``, ``Class(...)``, ``--flag=...``);
- an ellipsis touches a digit (a number cut: ``2,049…``);
- a number on it (``1,048,576``, ``107.8``, ``-56%``, ``+1,234.5``) appears nowhere in the
  wide rendering (a number split across lines: ``1048`` / ``576``);
- it holds nothing but one number or unit (``MiB``, ``+40%``: a value on a line of its own);
- it starts with a unit and the line before ends with a number (``16.0`` / ``MiB``).

The layout's own guarantees (every cell whole at any width, a stated order of moving
columns) are checked in test_layout.py.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

import tracecli.cli.output as output
from conftest import DDP_GPU, FIXTURES, RESNET, VGG, run

WIDTH = 80
MLP = FIXTURES / "mlp_chainer.txt"
SPARSE = FIXTURES / "sparse" / "embed_horovod.txt"
K = FIXTURES / "kineto"
GH200 = FIXTURES / "nccl" / "cscs_gh200_2x1_all_reduce_perf.txt"
RUNS = sorted(p for p in (FIXTURES / "multirank").iterdir() if p.is_dir()
              and any(p.glob("*.json*")))
KINETO = sorted(K.glob("*.json.gz"))
MODULES = sorted((FIXTURES / "kineto_modules").glob("*.json.gz"))  # names from module scopes
DIFFS = [("multirank/gloo2_diff_cap25", "multirank/gloo2_diff_cap05"),
         ("multirank/gloo2_clean", "multirank/gloo2_straggler"),
         ("kineto/mlp_default.json.gz", "kineto/mlp_cap1.json.gz"),
         ("kineto/resnet18_default.json.gz", "kineto/resnet18_cap25.json.gz")]
FRAMEWORKS = sorted((FIXTURES / "megatron").glob("*.json.gz")) + \
    sorted((FIXTURES / "deepspeed").glob("*.json.gz"))
FSDP = sorted(p for p in (FIXTURES / "fsdp").iterdir() if p.is_dir())


def _commands() -> list[list[str]]:
    """Every view of the samples and fixtures (what refuses a trace is left out: errors are
    one line by design)."""
    cmds: list[list[str]] = []
    op_list = ["--backward-ms", "120"]
    for trace, extra in ((VGG, []), (RESNET, op_list), (MLP, []), (SPARSE, op_list)):
        t = str(trace)
        cmds += [["inspect", t], ["inspect", t, "--per-gradient"],
                 ["plan-buckets", t, *extra], ["plan-buckets", t, "--compare", *extra],
                 ["plan-buckets", t, "--compare", "--gpus", "64", "--network", "25gbe", *extra],
                 ["replay", t, "--dry-run", "--network", "ib-hdr", "--gpus", "4", *extra]]
        for s in ("per-tensor", "ddp", "horovod", "tf-spec", "optimal"):
            cmds.append(["plan-buckets", t, "--strategy", s, "--gpus", "16", *extra])
        cmds.append(["plan-buckets", t, "--platform", "dgx-h100", "--nodes", "8", "--nccl",
                     "2.30.7", *extra])
    a100 = str(DDP_GPU)  # no shapes: what the run did, not what other plans would do
    cmds += [["inspect", a100], ["inspect", a100, "--per-gradient"],
             ["plan-buckets", a100, "--strategy", "observed"],
             ["replay", a100, "--dry-run", "--strategy", "observed", "--gpus", "2"]]
    for k in KINETO + MODULES + [f for f in FRAMEWORKS if f.name != "mc_tiny.json.gz"]:  # no sidecar
        cmds.append(["inspect", str(k), "--per-gradient"])
        if k.name != "mlp_noshapes.json.gz":  # no shapes
            cmds.append(["plan-buckets", str(k), "--compare"])
    for d in RUNS + FSDP:
        cmds.append(["inspect", str(d)])
        # one rank's trace without shapes; a run missing a rank's trace: both refused
        if d.name not in ("a100_host_ahead", "gloo4_missing_rank"):
            cmds.append(["plan-buckets", str(d), "--compare"])
    cmds.append(["replay", str(FIXTURES / "multirank" / "gloo2_clean"), "--dry-run"])
    cmds += [["diff", str(FIXTURES / a), str(FIXTURES / b)] for a, b in DIFFS]
    for k in MODULES:  # module paths in the layer view and in the buckets' gradient names
        cmds += [["inspect", str(k)], ["plan-buckets", str(k), "--max-bytes", "2k"]]
    for platform in ("dgx-h100", "aws-p4d", "gcp-a3"):
        cmds.append(["collective", "allreduce", "--platform", platform, "--nodes", "2"])
    cmds += [["collective", "allreduce", "--measured", str(GH200), "--nodes", "2",
              "--nic-gbps", "200", "--nccl", "2.30.7"],
             ["collective", "allgather", "--platform", "dgx-h100", "--nodes", "4"],
             ["collective", "reducescatter", "--platform", "aws-p4d", "--nodes", "16"]]
    return cmds


COMMANDS = _commands()

NUMBER = re.compile(r"[+-]?(\d[\d,]*)(\.\d+)?(%|x|ms|us)?[),;:]?")
UNIT = re.compile(r"(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|GB/s|ms|us|%)[),;:]?")
PASTE = re.compile(r"^\s*(export |\S+=\S|[A-Za-z_.]+\(|--[a-z_-]+[= ])")
SETTING = re.compile(r"[A-Za-z_.]+\(\w+, \w+=|\b[A-Z][A-Z_]+=\S|--\w[\w-]*[= ]\S")


class Both:
    """The CLI's console, printing each view at 80 columns and at 1,000."""

    def __init__(self):
        self.narrow, self.wide = (Console(file=io.StringIO(), width=w, color_system=None,
                                          highlight=False, soft_wrap=False)
                                  for w in (WIDTH, 1000))

    def print(self, view) -> None:
        self.narrow.print(view)
        self.wide.print(view)


def problems(narrow: str, wide: str, lines: str = "") -> list[str]:
    """What a reader at 80 columns would find wrong (see the module's docstring)."""
    known = {t.rstrip("),;:") for t in wide.split()}
    found = []
    previous: list[str] = []
    for k, line in enumerate(narrow.splitlines() + lines.splitlines()):
        where = f"line {k + 1}: {line.rstrip()!r}"
        if len(line.rstrip()) > WIDTH and not (PASTE.match(line) or (
                k >= len(narrow.splitlines()) and SETTING.search(line))):
            found.append(f"over {WIDTH} columns, {where}")
        if re.search(r"\d…|…\d", line):
            found.append(f"a number cut, {where}")
        tokens = line.split()
        for j, token in enumerate(tokens):
            if NUMBER.fullmatch(token) and token.rstrip("),;:") not in known and k < len(
                    narrow.splitlines()) and not (j == 0 and re.fullmatch(r"\d{1,3}", token)):
                found.append(f"{token!r} is in no wide rendering (a split number), {where}")
            if j == 0 and UNIT.fullmatch(token) and previous and NUMBER.fullmatch(previous[-1]):
                found.append(f"{token!r} split from its number {previous[-1]!r}, {where}")
        if len(tokens) == 1 and (NUMBER.fullmatch(tokens[0]) or UNIT.fullmatch(tokens[0])):
            found.append(f"a value on a line of its own, {where}")
        previous = tokens
    return found


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(Path(a).name if "/" in a else a
                                                         for a in c) for c in COMMANDS])
def test_reads_at_80_columns(args, monkeypatch):
    if args[0] in ("replay", "calibrate"):
        pytest.importorskip("torch", reason="replay and calibrate need torch, even --dry-run")
    both = Both()
    monkeypatch.setattr(output, "console", lambda: both)
    result = run(*args, env={"COLUMNS": str(WIDTH), "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    narrow, wide = both.narrow.file.getvalue(), both.wide.file.getvalue()
    assert narrow, "the command printed no view"
    found = problems(narrow, wide, result.stdout + result.stderr)
    assert not found, "\n".join(found[:20])


def test_the_checks_catch_what_issue_26_saw():
    """The readings of issue 26, as main printed them, fail here."""
    assert problems("  1048    1.0  121.0\n   576    MiB      8\n",
                    "  1048576  1.0 MiB  121.08\n")
    assert problems("  allre…  gradi…  2,049…  107.8…\n", "allreduce gradients 2,049,000\n")
    assert problems("  +1,234,218.\n  4\n", "+1,234,218.4\n")
    assert problems("x" * 81 + "\n", "")
    assert not problems("  16.0 MiB  Ring\n", "16.0 MiB Ring\n")
    assert not problems("", "", "    DistributedDataParallel(model, bucket_cap_mb=25" + "0" * 40)
