"""The README stays true: its Python example runs and every command it names exists."""

from __future__ import annotations

import os
import re

from tracecli.cli import cli

from conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_python_example_runs(monkeypatch, capsys):
    block = re.search(r"## Library.*?```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(ROOT)
    exec(compile(block, "README.md", "exec"), {})
    iteration, setting = capsys.readouterr().out.split(" ", 1)
    assert float(iteration) > 0 and "DistributedDataParallel" in setting


def test_every_command_named_exists():
    named = set(re.findall(r"^tracecli ([a-z-]+)", README, re.M))
    assert named == set(cli.commands)


def test_the_two_setup_commands_are_make_targets():
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make (\w+)", README, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
