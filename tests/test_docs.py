"""The documentation stays true: README.md and docs/*.md are checked against the code.

- A code block whose first line starts with ``$ `` shows real commands and their real output:
  each ``$`` line runs (bash, from a fresh directory that sees the repository's
  ``sample_traces/`` and ``tests/``, ``tracecli`` being this tree's, 80 columns, no colour),
  one directory per page so a page's commands share a session, and what it printed (stderr,
  then stdout) must be the lines below it. After a deliberate change of output, refresh
  every such block and review the diff::

      python tests/test_docs.py --update

- Every other ``tracecli`` line of a code block, and every ```tracecli ...``` code span,
  names a real command and real options; every ``--option`` named anywhere is one of
  tracecli's or one of the other tools' listed in ``FOREIGN``.
- Every schema of docs/json.md holds exactly the keys the commands print (``SCHEMAS``).
- Every Python block compiles, docs/library.md's run, and the sidecar one-liners are the
  ones the fixture generators ran.
- Every relative link reaches a file, and an anchor a heading of it.
- docs/cli.md is what :mod:`tracecli.cli.reference` renders now.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CLI_MD = DOCS / "cli.md"
PAGES = [ROOT / "README.md", *sorted(p for p in DOCS.glob("*.md") if p != CLI_MD)]
UPDATE = "python tests/test_docs.py --update"

# Options of other tools that the pages name (torchrun, Megatron-LM, tf_cnn_benchmarks).
FOREIGN = {"--nnodes", "--nproc-per-node", "--overlap-grad-reduce", "--ddp-bucket-size",
           "--use-distributed-optimizer", "--accumulate-allreduce-grads-in-fp32",
           "--all_reduce_spec", "--agg_small_grads_max_bytes", "--agg_small_grads_max_group",
           "--nccl-only", "--write", "--update", "--ranks"}  # and the benchmarks', and this test's own


# -- reading the pages --------------------------------------------------------------------

def code_blocks(text: str) -> list[tuple[int, int, str, list[str]]]:
    """``(first, end, info, lines)`` of each fenced block: its body is ``lines``, the
    page's lines ``first`` to ``end`` (exclusive); ``info`` is the fence's language."""
    lines, blocks, k = text.split("\n"), [], 0
    while k < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[k])
        if m:
            end = next(j for j in range(k + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((k + 1, end, m.group(2), lines[k + 1:end]))
            k = end
        k += 1
    return blocks


def console_blocks(text: str) -> list[tuple[int, int, list[tuple[str, list[str]]]]]:
    """The ``$`` blocks: ``(first, end, [(command, expected output lines), ...])``."""
    found = []
    for first, end, _, body in code_blocks(text):
        if not body or not body[0].startswith("$ "):
            continue
        steps: list[tuple[str, list[str]]] = []
        for line in body:
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
        found.append((first, end, steps))
    return found


def prose(text: str) -> str:
    """``text`` without its fenced blocks."""
    lines = text.split("\n")
    for first, end, _, _ in reversed(code_blocks(text)):
        del lines[first - 1:end + 1]
    return "\n".join(lines)


# -- running the $ blocks -----------------------------------------------------------------

@contextmanager
def sandbox() -> Iterator[Path]:
    """A fresh directory with the repository's samples and fixtures, and ``bin/tracecli``
    running this tree's tracecli with this interpreter; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="tracecli-docs-") as tmp:
        where = Path(tmp)
        for name in ("sample_traces", "tests"):
            (where / name).symlink_to(ROOT / name)
        (where / "bin").mkdir()
        shim = where / "bin" / "tracecli"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tracecli "$@"\n')
        shim.chmod(0o755)
        yield where


def run_console(command: str, where: Path) -> list[str]:
    """What ``command`` prints in ``where`` at 80 columns: stderr, then stdout."""
    env = {**os.environ, "PATH": f"{where / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    p = subprocess.run(["bash", "-c", command], cwd=where, env=env, capture_output=True,
                       text=True, timeout=600)
    return _tidy((p.stderr + p.stdout).split("\n"))


def _tidy(lines: list[str]) -> list[str]:
    """Trailing spaces and trailing blank lines off (rich pads its tables)."""
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def page_outputs(page: Path) -> list[tuple[str, list[str], list[str]]]:
    """``(command, expected, actual)`` for every ``$`` line of ``page``, in page order (a
    command sees the session the ones before it left)."""
    steps = [step for _, _, block in console_blocks(page.read_text()) for step in block]
    with sandbox() as where:
        return [(cmd, _tidy(expected), run_console(cmd, where)) for cmd, expected in steps]


def update(page: Path) -> bool:
    """Rewrite ``page``'s ``$`` blocks with what their commands print now; True if changed."""
    text = page.read_text()
    blocks = console_blocks(text)
    with sandbox() as where:  # in page order, as the test runs them
        bodies = [(first, end, [line for cmd, _ in steps
                                for line in (f"$ {cmd}", *run_console(cmd, where))])
                  for first, end, steps in blocks]
    lines = text.split("\n")
    for first, end, body in reversed(bodies):
        lines[first:end] = body
    new = "\n".join(lines)
    if new != text:
        page.write_text(new)
    return new != text



# -- the tests ------------------------------------------------------------------------------

import click  # noqa: E402
import pytest  # noqa: E402

from tracecli.cli import cli  # noqa: E402
from tracecli.cli.reference import REGENERATE, command_help, reference  # noqa: E402


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", [p for p in PAGES if console_blocks(p.read_text())], ids=_id)
def test_console_blocks_show_what_the_commands_print(page):
    for cmd, expected, actual in page_outputs(page):
        assert actual == expected, (
            f"{_id(page)}: `{cmd}` now prints:\n" + "\n".join(actual)
            + f"\n\nrefresh the page's output blocks with `{UPDATE}` and review the diff")


def _options(command: click.Command) -> dict[str, click.Parameter]:
    """Every option name of ``command``, the help option's (``-h``, ``--help``) too."""
    ctx = click.Context(command, help_option_names=["-h", "--help"])
    params = [*command.params, command.get_help_option(ctx)]
    return {opt: p for p in params if isinstance(p, click.Option)
            for opt in (*p.opts, *p.secondary_opts)}


ALL_OPTIONS = set(_options(cli)) | {opt for c in cli.commands.values() for opt in _options(c)}


def command_lines(text: str) -> list[str]:
    """Every ``tracecli`` command of ``text`` outside ``$`` blocks (those run): code lines
    starting with ``tracecli `` and ```tracecli ...``` code spans, comments cut."""
    found = []
    for _, _, info, body in code_blocks(text):
        if info == "python" or (body and body[0].startswith("$ ")):
            continue
        found += [line.split("  #")[0].strip() for line in body if line.startswith("tracecli ")]
    found += re.findall(r"`(tracecli [^`]+)`", prose(text))
    return found


def check_command(line: str) -> None:
    """``line`` names a command, and options that command has, with valid choices."""
    words = shlex.split(line)[1:]
    while words and words[0] in _options(cli):  # tracecli --debug inspect ...
        words.pop(0)
    assert words and words[0] in cli.commands, f"`{line}`: no such command"
    options = _options(cli.commands[words[0]])
    for k, word in enumerate(words[1:], 1):
        if not word.startswith("-") or word == "-" or word.startswith("--") is False and \
                not re.fullmatch(r"-[a-zA-Z]", word):
            continue
        name = word.split("=")[0]
        assert name in options, f"`{line}`: {words[0]} has no option {name}"
        param = options[name]
        value = word.split("=", 1)[1] if "=" in word else (words[k + 1] if k + 1 < len(words) else "")
        if isinstance(param.type, click.Choice) and not re.search(r"[|\[\].A-Z]", value):
            assert value in param.type.choices, f"`{line}`: {name} {value} is not a choice"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_command_line_is_a_real_command(page):
    lines = command_lines(page.read_text())
    for line in lines:
        check_command(line)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_option_named_exists(page):
    named = set(re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", page.read_text()))
    unknown = named - ALL_OPTIONS - FOREIGN
    assert not unknown, f"{_id(page)} names options no command has: {sorted(unknown)}"


def test_the_pages_name_every_command():
    text = "\n".join(p.read_text() for p in PAGES)
    named = {line.split()[1] for line in re.findall(r"tracecli [a-z-]+", text)}
    assert set(cli.commands) <= named


# -- links -----------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m) for m in re.findall(r"^#+ (.*)$", prose(page.read_text()), re.M)}


@pytest.mark.parametrize("page", [*PAGES, CLI_MD], ids=_id)
def test_every_link_reaches_its_target(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{_id(page)}: link to {target}: no such file"
        if anchor:
            assert anchor in anchors(dest), f"{_id(page)}: link to {target}: no such heading"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_repository_path_named_exists(page):
    """``tracecli/...``, ``tests/...``, ``benchmarks/...`` and ``sample_traces/...`` paths
    (a bare file name after a path names a file in that path's folder)."""
    text = page.read_text()
    named = re.findall(r"(?<![\w/.-])((?:tracecli|tests|benchmarks|sample_traces)/[\w./-]*\w)", text)
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"{_id(page)} names paths that do not exist: {sorted(set(missing))}"


# -- Python ----------------------------------------------------------------------------------

def python_blocks(page: Path) -> list[str]:
    return ["\n".join(body) for _, _, info, body in code_blocks(page.read_text()) if info == "python"]


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=_id)
def test_python_blocks_compile(page):
    for k, block in enumerate(python_blocks(page)):
        compile(block, f"{_id(page)} block {k}", "exec")


def test_library_example_runs(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    for block in python_blocks(DOCS / "library.md"):
        exec(compile(block, "docs/library.md", "exec"), {})
    iteration, setting = capsys.readouterr().out.split(" ", 1)
    assert float(iteration) > 0 and setting.startswith("DistributedDataParallel(")


def test_sidecar_one_liners_are_the_generators():
    """The one-liners docs/inputs.md gives are, verbatim, what wrote the fixtures' sidecars
    (DeepSpeed's generator keeps the list it writes: its comprehension is compared)."""
    liners = [b for b in python_blocks(DOCS / "inputs.md") if b.startswith("json.dump(")]
    assert len(liners) == 3
    generators = [(ROOT / "tests/fixtures/kineto/generate.py").read_text(),
                  (ROOT / "tests/fixtures/megatron/generate_megatron.py").read_text(),
                  (ROOT / "tests/fixtures/deepspeed/generate_deepspeed_truth.py").read_text()]
    for liner, source in zip(liners[:2], generators):
        written = liner.replace('open("trace.sizes.json", "w")', "open(path, \"w\")")
        assert written in source
    listed = liners[2].removeprefix("json.dump(").removesuffix(', open("trace.sizes.json", "w"))')
    assert listed.startswith("[{") and f"return {listed}\n" in generators[2]


# -- JSON schemas ----------------------------------------------------------------------------

JSON_MD = DOCS / "json.md"
S, K, F = "sample_traces/", "tests/fixtures/kineto/", "tests/fixtures/"
FSDP = F + "fsdp/"
VGG, TF, A100 = S + "vgg19_chainer.txt", S + "resnet50_horovod_tf.txt", S + "resnet50_ddp_nccl_2xa100.json.gz"
SPARSE, CSCS = F + "sparse/embed_horovod.txt", F + "nccl/cscs_gh200_2x1_all_reduce_perf.txt"
TOPOLOGY = ["--platform", "dgx-h100", "--nodes", "2", "--nccl", "2.30.7"]
MEASURED = ["--nodes", "2", "--gpus-per-node", "1", "--nic-gbps", "200", "--nccl", "2.30.7"]


def section(name: str) -> str:
    """The text of json.md's ``## name`` section."""
    text = JSON_MD.read_text()
    start = text.index(f"\n## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def documented_keys(name: str) -> set[str]:
    """The keys a section's schema blocks name: quoted names that are not values
    (``"key": "value"``), comments cut."""
    keys: set[str] = set()
    for _, _, _, body in code_blocks(section(name)):
        for line in body:
            keys |= set(re.findall(r'(?<!: )"([A-Za-z_]\w*)"', line.split("#")[0]))
    return keys


def json_keys(value, opaque=frozenset()) -> set[str]:
    """Every key of a JSON value, at any depth; rank keys (``"0"``) are not names, and an
    ``opaque`` key's value is not looked into."""
    keys: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if not key.isdigit():
                keys.add(key)
            if key not in opaque:
                keys |= json_keys(item, opaque)
    elif isinstance(value, list):
        for item in value:
            keys |= json_keys(item, opaque)
    return keys


def printed(*argv) -> dict:
    """The JSON ``tracecli ARGV`` prints, run from the repository root."""
    from click.testing import CliRunner

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(cli, [str(a) for a in argv])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, (argv, result.output)
    return json.loads(result.stdout)


def replay_documents() -> list[dict]:
    """A real replay (2 gloo ranks, one iteration, with --baseline), and the keys of an
    in-place calibration (a tiny trace's own sizes are too few to calibrate reliably)."""
    pytest.importorskip("torch", reason="replay needs the replay extra (torch)")
    from tracecli.replay.records import InPlaceCalibration

    doc = printed("replay", F + "mlp_chainer.txt", "--gpus", "2", "--iters", "1", "--warmup", "0",
                  "--network", "10gbe", "--baseline", "--json")
    calibration = InPlaceCalibration((), 1.0, 1.0, 1.0, 1.0, False, "").to_json()
    return [doc, {"replay": {"calibration": calibration}}]


def calibrate_documents() -> list[dict]:
    """What calibrate prints with a topology, made from a measured sweep without ranks."""
    from tracecli.costs import CalibrationProfile, ProfilePoint
    from tracecli.costs.nccl.model import NcclModel
    from tracecli.cli.results import CalibrationResult

    points = [ProfilePoint(4096, 0.1, 0.1, (0.1,), (0.09,), 0.09, 0.09),
              ProfilePoint(1 << 20, 1.0, 1.0, (1.0,), (0.9,), 0.9, 0.9)]
    profile = CalibrationProfile.measured(points, 2, "gloo", "cpu")
    nccl = NcclModel.for_topology("h100", 1, 2, True, 0.0, 0)
    return [json.loads(CalibrationResult(profile, nccl).json_text())]


def status_documents() -> list[dict]:
    """``status --json`` in a fresh directory after ``inspect`` and ``plan-buckets``."""
    from click.testing import CliRunner

    runner, cwd = CliRunner(), os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for argv in (["inspect", ROOT / VGG], ["plan-buckets"]):
                assert runner.invoke(cli, [str(a) for a in argv]).exit_code == 0
            result = runner.invoke(cli, ["status", "--json"])
        finally:
            os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return [json.loads(result.stdout)]


def diff_documents() -> list[dict]:
    """``diff --json`` of two runs, and with the plan file the second was made from."""
    before, after = F + "multirank/gloo2_diff_cap25", F + "multirank/gloo2_diff_cap05"
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan.json")
        printed("plan-buckets", before, "--strategy", "ddp", "--max-bytes", "0.5MiB", "--json",
                "--out", plan)
        return [printed("diff", before, after, "--json"),
                printed("diff", before, after, "--plan", plan, "--json")]


def plan_documents() -> list[dict]:
    strategies = ("ddp", "horovod", "tf-spec", "megatron", "deepspeed", "optimal")
    return [printed("plan-buckets", VGG, "--json"),
            *(printed("plan-buckets", VGG, "--strategy", s, "--json") for s in strategies),
            printed("plan-buckets", VGG, "--json", *TOPOLOGY),
            # aws-ofi-nccl's tuner: the cost model's "tuner" spelt out (ofi_tuner.py)
            printed("plan-buckets", VGG, "--json", "--platform", "aws-p5", "--nodes", "4"),
            printed("plan-buckets", VGG, "--json", *MEASURED, "--nccl-tests", CSCS),
            printed("plan-buckets", A100, "--strategy", "observed", "--json"),
            printed("plan-buckets", K + "unused.json.gz", "--strategy", "observed", "--json"),
            printed("plan-buckets", SPARSE, "--backward-ms", "50", "--json"),
            printed("plan-buckets", FSDP + "hsdp_2x2/rank0.json.gz", "--strategy", "fsdp2",
                    "--json"),
            printed("plan-buckets", FSDP + "fsdp2_default/rank0.json.gz", "--strategy",
                    "fsdp2", "--fsdp-reshard-after-forward", "false", "--json"),
            printed("plan-buckets", FSDP + "fsdp1_backward_pre/rank0.json.gz", "--strategy",
                    "observed", "--json"),
            # notes: a sparse gradient all-gathered on its own (observed now matches the
            # unused fixture's buckets by DDP's own rule, issue 24, and says nothing)
            printed("plan-buckets", SPARSE, "--backward-ms", "50", "--strategy", "horovod", "--json"),
            *framework_plan_documents()]


def framework_plan_documents() -> list[dict]:
    """Plans whose gradients carry marks (Megatron's expert and shared embedding, DeepSpeed's
    communication dtype) and a DeepSpeed flush sent as pieces."""
    ds, mc = F + "deepspeed/", F + "megatron/"
    return [printed("plan-buckets", mc + "mc_moe.json.gz", "--strategy", "megatron", "--json"),
            printed("plan-buckets", mc + "distopt.json.gz", "--strategy", "megatron",
                    "--megatron-distributed-optimizer", "--json"),
            printed("plan-buckets", ds + "ds_autocast_z2.json.gz", "--strategy", "deepspeed",
                    "--deepspeed-autocast", "bfloat16", "--json"),
            printed("plan-buckets", ds + "ds_split_z2.json.gz", "--strategy", "deepspeed",
                    "--gpus", "2", "--deepspeed-reduce-bucket-size", "3000", "--json")]


# json.md section -> (what prints it, keys whose values it does not spell out, keys it
# documents that no input here produces, sections whose keys it also may use)
SCHEMAS = {
    "inspect --json": (lambda: [printed("inspect", t, "--json") for t in (VGG, TF, A100, SPARSE)],
                       {"ops_by_kind"}, set(), ()),
    "plan-buckets --json and the plan file": (plan_documents, {"options"}, {  # FSDP knobs
        "fsdp_wrap", "fsdp_prefetch", "fsdp_param_dtype", "fsdp_reduce_dtype", "fsdp_mesh",
        "memory_gib", "fsdp1_backward_prefetch", "fsdp1_forward_prefetch",
        "fsdp1_limit_all_gathers"}, ()),
    "plan-buckets --compare --json": (
        lambda: [printed("plan-buckets", VGG, "--compare", "--json"),
                 printed("plan-buckets", K + "mlp_default.json.gz", "--compare", "--json"),
                 printed("plan-buckets", FSDP + "fsdp2_default/rank0.json.gz", "--compare",
                         "--memory-gib", "1", "--json")],
        {"settings"}, set(), ("plan-buckets --json and the plan file",)),  # advice's records
    "replay --json": (replay_documents, {"options"}, set(),
                      ("plan-buckets --json and the plan file",)),
    "calibrate --json and the profile file": (calibrate_documents, {"topology"}, set(), ()),
    "collective --json": (
        lambda: [printed("collective", "allreduce", *TOPOLOGY, "--sizes", "1M", "--json"),
                 printed("collective", "allreduce", *MEASURED, "--measured", CSCS, "--sizes",
                         "1M", "--json")],
        {"graph", "time_model"}, set(), ()),  # both as in cost_model (checked there)
    "inspect RUN --json": (
        lambda: [printed("inspect", F + "multirank/" + case, "--json")
                 for case in ("gloo2_twogroups", "gloo4_straggler_offsets", "gloo4_alltoallv",
                              "gloo2_pipeline", "gloo4_backward_straggler")],
        set(), {"count", "reason"}, ()),  # unmatched entries: every fixture's collectives match
    "diff --json": (diff_documents, set(), set(), ()),
    "status --json": (status_documents, {"options"}, set(), ()),
    "export --to json": (lambda: [printed("export", t, "--to", "json", "-o", "-")
                                  for t in (VGG, TF, A100, F + "deepspeed/ds_autocast_z2.json.gz")],
                         {"attrs"}, set(), ()),
}


def test_every_json_md_section_is_checked():
    sections = re.findall(r"^## (.+)$", prose(JSON_MD.read_text()), re.M)
    assert set(sections) == set(SCHEMAS)


@pytest.mark.parametrize("name", SCHEMAS)
def test_json_schema_matches_what_the_commands_print(name):
    produce, opaque, unseen, also = SCHEMAS[name]
    real = set().union(*(json_keys(doc, opaque) for doc in produce()))
    documented = documented_keys(name)
    allowed = documented.union(*(documented_keys(other) for other in also))
    assert not real - allowed, f"json.md '{name}' misses keys the commands print: {sorted(real - allowed)}"
    stale = documented - real - unseen
    assert not stale, f"json.md '{name}' names keys no command printed: {sorted(stale)}"


# -- the CLI reference -----------------------------------------------------------------------

def test_cli_reference_is_current():
    assert CLI_MD.read_text() == reference(), \
        f"docs/cli.md is stale: regenerate it with `{REGENERATE}`"


def test_cli_reference_is_what_help_prints_at_80_columns():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    for path in [(), *((name,) for name in cli.commands)]:
        printed = subprocess.run([sys.executable, "-m", "tracecli", *path, "--help"], env=env,
                                 capture_output=True, text=True, check=True).stdout
        assert command_help(path) + "\n" == printed, path


def test_reference_module_writes_the_reference():
    out = subprocess.run([sys.executable, "-m", "tracecli.cli.reference"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
                         capture_output=True, text=True, check=True).stdout
    assert out == reference()


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {UPDATE}")
    sys.path.insert(0, str(ROOT))
    for page in PAGES:
        if update(page):
            print(f"updated {page.relative_to(ROOT)}")
