"""Shared test helpers: sample and fixture paths, running a command, checking an error line,
and writing small Chainer dumps. Test modules import the names they use (``from conftest import
run, assert_error, VGG``); fixtures (``dump``) arrive by name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracecli.cli import cli

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
VGG = SAMPLES / "vgg19_chainer.txt"
RESNET = SAMPLES / "resnet50_horovod_tf.txt"
RESNET_SIZES = SAMPLES / "resnet50_horovod_tf.sizes.json"
DDP_GPU = SAMPLES / "resnet50_ddp_nccl_2xa100.json.gz"
GOLDEN = Path(__file__).resolve().parent / "golden"

# the fixtures' generators are scripts run by hand (with torch and the frameworks), not tests
collect_ignore_glob = ["fixtures/*"]


def run(*args, input=None, env=None):
    """Runs ``tracecli ARGS`` through click's CliRunner; arguments may be paths or numbers."""
    return CliRunner(env=env).invoke(cli, [str(a) for a in args], input=input)


def assert_error(result, where: str, *words: str):
    """Exit 2, exactly one line on stderr, starting with ``where`` and naming ``words``
    (the phase lines of work that ran over 5 s before it failed aside: they are progress)."""
    from tracecli.cli.progress import PHASE_LINE

    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.strip().splitlines() if not PHASE_LINE.match(x)]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(where), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert "Traceback" not in result.output


def check_golden(name: str, text: str) -> None:
    """``text`` equals tests/golden/NAME; with TRACECLI_UPDATE_GOLDEN=1 in the environment the
    file is (re)written from ``text`` instead, to be reviewed with git diff before committing."""
    path = GOLDEN / name
    if os.environ.get("TRACECLI_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} is missing: rerun with TRACECLI_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), f"{name} differs (TRACECLI_UPDATE_GOLDEN=1 rewrites it)"


class ChainerDump:
    """Writes small Chainer dumps: tensors and forward ops; backward records derived."""

    def __init__(self):
        self.tensors: list[tuple[int, int, str]] = []
        self.ops: list[tuple[str, list, list, str, dict]] = []

    def tensor(self, size: int, name: str = "_") -> int:
        tid = len(self.tensors)
        self.tensors.append((tid, size, name))
        return tid

    def forward(self, cls: str, inputs: list[int], outputs: list[int], rank: int,
                grads_for: list[int] | None = None) -> None:
        self.ops.append(("forward", [(i, "_") for i in inputs], outputs, cls, {"rank": rank}))
        targets = inputs if grads_for is None else grads_for
        roles = [(o, "gradient") for o in outputs] + [(i, "input") for i in inputs]
        self.ops.append(("backward", roles, targets, cls, {"rank": rank}))

    def text(self, backward_first: bool = False) -> str:
        ops = sorted(self.ops, key=lambda o: o[0] != "backward") if backward_first else self.ops
        lines = [f"{len(self.tensors)} {len(ops)}"]
        lines += [f"{t} {s} {n}" for t, s, n in self.tensors]
        for phase, ins, outs, cls, attrs in ops:
            lines += [phase, f"{len(ins)} {len(outs)}"]
            lines += [f"{i} {r}" for i, r in ins]
            lines += [str(o) for o in outs]
            lines += [cls, json.dumps(attrs)]
        return "\n".join(lines) + "\n"

    def write(self, path: Path, **kw) -> Path:
        path.write_text(self.text(**kw))
        return path


@pytest.fixture
def dump():
    return ChainerDump()


@pytest.fixture(autouse=True)
def _own_directory(tmp_path_factory, monkeypatch):
    """Each test runs in a fresh directory: the session state (.tracecli/) of one test never
    reaches another, nor the repository."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch):
    """Each test sees the width of no terminal: a ``COLUMNS`` (or ``LINES``) exported by the
    shell that runs pytest would wrap prose on stderr (``tracecli.cli.output.text_width``) where
    tests match it on one line. A test that checks a width sets ``COLUMNS`` itself."""
    for name in ("COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
