"""Every command's output on the samples, byte for byte, before and after a change.

Runs the same commands with two versions of tracecli (a git revision, checked out into a
temporary worktree, and this tree) and compares what each printed (stdout, stderr, exit
status) and every file it wrote. Refactors must leave them identical; a deliberate change
shows here as a diff to explain.

    python benchmarks/output_diff.py                 # the working tree against HEAD
    python benchmarks/output_diff.py --base acf91ab  # against another revision
    python benchmarks/output_diff.py --list          # the commands, one a line

Only deterministic commands are run: replay and calibrate measure, so they appear as
``replay --dry-run`` (which checks and predicts without starting ranks).

Deliberate changes are listed in INTENDED: each rewrites the base revision's output the way
the change meant to, so what remains must still be identical; those too wide for a rewrite
are in ALLOWED, which names the lines they may change, everything else still compared; new
measurements and additions are in NORMALIZED, which masks them the same way on both sides;
EXPECTED lists the commands whose output differs on purpose beyond these, with the reason.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "HEAD"  # the last commit: a change in progress against it (acf91ab: before issue 14)
S = ROOT / "sample_traces"
K = ROOT / "tests" / "fixtures" / "kineto"
VGG, RESNET, A100 = S / "vgg19_chainer.txt", S / "resnet50_horovod_tf.txt", \
    S / "resnet50_ddp_nccl_2xa100.json.gz"
MLP = ROOT / "tests" / "fixtures" / "mlp_chainer.txt"
SPARSE = ROOT / "tests" / "fixtures" / "sparse" / "embed_horovod.txt"
GH200 = ROOT / "tests" / "fixtures" / "nccl" / "cscs_gh200_2x1_all_reduce_perf.txt"
KINETO = [K / f"{n}.json.gz" for n in ("mlp_default", "mixed_bf16", "tied_lm", "unused",
                                        "mlp_noshapes", "convbn_cap")]
STRATEGIES = ("per-tensor", "single", "size", "ddp", "horovod", "tf-spec", "optimal")
MODULES = [ROOT / "tests" / "fixtures" / "kineto_modules" / f"{n}.json.gz"
           for n in ("convbn", "tied_frozen", "ddp_convbn")]  # recorded with module scopes


# (what changed and why, which commands, the rewrite of the base output)
INTENDED = [
    ("issue 14: Op.rank is Chainer's generation, renamed before a distributed rank arrives; "
     "exported op nodes say generation",
     lambda cmd: cmd[0] == "export",
     lambda out: re.sub(rb'("layer": (?:null|"(?:[^"\\]|\\.)*"), )"rank": ', rb'\1"generation": ',
                        out.replace(b'attr.name="rank"', b'attr.name="generation"'))),
    ("issue 17 item 5: an embedding's update link goes to the op that consumes its gradient "
     "(UnsortedSegmentSum, op36), not its scope's first op (Unique, op35)",
     lambda cmd: cmd[0] == "export" and cmd[1].endswith("embed_horovod.txt"),
     lambda out: out.replace(b'{"source": "op34", "target": "op35", "kind": "update"}',
                             b'{"source": "op34", "target": "op36", "kind": "update"}')
     .replace(b'<edge source="op34" target="op35">', b'<edge source="op34" target="op36">')),
    ("issue 17 item 13: status lists only the options the remembered plan's strategy reads "
     "(the session's plan is a size plan: --max-bytes)",
     lambda cmd: cmd == ["status"],
     lambda out: re.sub(rb"(?m)^  --(first-bucket-bytes|cycle-ms|spec|agg-small-grads-max-bytes|"
                        rb"agg-small-grads-max-group|sparse-as-dense): .*\n", b"", out)),
]


def _each_object(node, visit) -> None:
    """``visit`` every JSON object in ``node``, outermost first (after its visit, an object's
    values are walked as they are then)."""
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _each_object(value, visit)
    elif isinstance(node, list):
        for value in node:
            _each_object(value, visit)


def _own_options(out: bytes) -> bytes:
    """A plan document (JSON text) with only the options its strategy reads."""
    import json

    sys.path.insert(0, str(ROOT))
    from tracecli.planning import STRATEGIES
    from tracecli.render.jsonout import dumps

    try:
        doc = json.loads(out)
    except ValueError:
        return out

    changed = []

    def keep_read_options(node: dict) -> None:
        if isinstance(node.get("options"), dict) and isinstance(node.get("strategy"), str):
            spec = STRATEGIES.get(node["strategy"])
            read = {k.name for k in spec.knobs} if spec is not None else set()
            kept = {k: v for k, v in node["options"].items() if k in read}
            if kept != node["options"]:
                node["options"] = kept
                changed.append(True)

    _each_object(doc, keep_read_options)
    return dumps(doc).encode() if changed else out


INTENDED.append((
    "issue 26 item 4: the reference moved from the README into docs/; messages point there",
    lambda cmd: True,
    lambda out: out.replace(b"(see the README) for the model's own names",
                            b"(docs/inputs.md) for the model's own names")
    .replace(b"(a parameter sidecar, see the README)", b"(a parameter sidecar, docs/inputs.md)")
    .replace(b"see the README)", b"docs/runs.md)")))


INTENDED.append((
    "issue 22 item 4: each strategy owns its options record; a plan document holds the options "
    "its strategy reads, not every knob of the table",
    lambda cmd: cmd[0] != "status", _own_options))  # the session keeps every knob given


def _session_options(out: bytes) -> bytes:
    """``status --json``: the remembered plan's options are every knob of the table at the
    values the plan-buckets call had (its strategy first), FSDP's knobs among them."""
    import json

    sys.path.insert(0, str(ROOT))
    from tracecli.planning import KNOBS
    from tracecli.render.jsonout import dumps

    try:
        doc = json.loads(out)
    except ValueError:
        return out
    plan = doc.get("plan") if isinstance(doc, dict) else None
    if not isinstance(plan, dict) or not isinstance(plan.get("options"), dict):
        return out
    given = plan["options"]
    plan["options"] = {"strategy": plan.get("strategy"),
                       **{k.name: given.get(k.name, k.default) for k in KNOBS}}
    return dumps(doc).encode()


INTENDED.append((
    "issue 27: the strategies listed where an unknown one is refused include fsdp2 and fsdp1",
    lambda cmd: "--strategy" in cmd,
    lambda out: out.replace(b"'deepspeed', 'optimal'", b"'deepspeed', 'fsdp2', 'fsdp1', 'optimal'")))
INTENDED.append((
    "issue 27: status --json lists the remembered plan's options as the session stores them, "
    "every knob of the table: FSDP's new knobs among them, at their defaults",
    lambda cmd: cmd == ["status", "--json"], _session_options))


def _run_settings_pasted(out: bytes) -> bytes:
    """A measured plan's "The run's own buckets: SETTING" line as the lines to paste, each
    within 80 columns (render.advice.paste_lines)."""
    sys.path.insert(0, str(ROOT))
    from tracecli.render.advice import paste_lines

    head = "The run's own buckets: "
    lines = out.decode(errors="replace").split("\n")
    new = []
    for line in lines:
        if line.startswith(head):
            new += [head.rstrip()] + paste_lines(line[len(head):], "  ")
        else:
            new.append(line)
    return "\n".join(new).encode()


INTENDED.append((
    "issue 26 item 1: a measured plan's own settings are pasted as lines within 80 columns "
    "(the comment above, the call broken after a comma inside its brackets)",
    lambda cmd: "observed" in cmd and "--json" not in cmd, _run_settings_pasted))


# Deliberate changes too wide for a rewrite of the base output alone (names, rows that move,
# numbers the change recomputes): each says which lines it may change, and takes those from
# the new output only where every other line, spacing aside, is identical (else the diff shows).
# (what changed and why, which commands, which lines: pred(line, cmd) on either side)

def _marked(lines: list[str], pred) -> set[int]:
    """Lines ``pred`` names, and the more indented lines right under each (their block)."""
    marked, indent = set(), None
    for i, line in enumerate(lines):
        depth = len(line) - len(line.lstrip())
        if pred(line):
            marked.add(i)
            indent = depth
        elif indent is not None and line.strip() and depth > indent:
            marked.add(i)
        else:
            indent = None
    return marked


def _spacing(line: str) -> str:
    return re.sub("─+", "─", re.sub(r"\s+", " ", line)).strip()


def _rest(text: bytes, pred) -> list[str]:
    lines = text.decode(errors="replace").splitlines()
    gone = _marked(lines, pred)
    return [_spacing(line) for i, line in enumerate(lines) if i not in gone and _spacing(line)]


def allowed(cmd: list[str], before: tuple, after: tuple) -> tuple:
    """``before`` with the lines each applicable entry of ALLOWED names taken from ``after``,
    where nothing else differs."""
    code, out, err, files = before
    for _, applies, pred in ALLOWED:
        if not applies(cmd):
            continue
        test = lambda line, p=pred: p(line, cmd)  # noqa: E731
        if out != after[1] and _rest(out, test) == _rest(after[1], test):
            out = after[1]
        files = {n: after[3][n] if n in after[3] and data != after[3][n]
                 and _rest(data, test) == _rest(after[3][n], test) else data for n, data in files.items()}
    return code, out, err, files


def _sidecar_names(cmd: list[str]) -> tuple[str, ...]:
    """The parameter names of the sidecar beside the command's trace (none: no sidecar)."""
    import json

    path = Path(cmd[1])
    side = Path(str(path).removesuffix(".json.gz") + ".sizes.json")
    return tuple(p["name"] for p in json.loads(side.read_text())) if side.is_file() else ()


def _names_line(line: str, cmd: list[str]) -> bool:
    """A line that names gradients: positional (``grad4[1024]``) or the sidecar's names, the
    layers rows they make, the note on how they were named."""
    if re.search(r"grad\d+\[", line) or "names from " in line:
        return True
    names = _sidecar_names(cmd)
    return any(f'"{n}"' in line or f" {n} " in f" {line} " for n in names)


ALLOWED = [
    ("issue 29 item 2: a profiler trace's gradients whose shapes repeat are named by the sidecar, "
     "by order (they kept positional names): gradient rows, the layers they make, the note on "
     "naming, and table widths",
     lambda cmd: len(cmd) > 1 and cmd[1].startswith(str(K)) and bool(_sidecar_names(cmd)),
     _names_line),
    ("issue 29 item 5: a DeepSpeed flush of a parameter past reduce_bucket_size is sent as "
     "pieces, each costed as its own collective (it was costed as one): the deepspeed rows' "
     "communication time and overlap, and where another setting wins now, its row and advice",
     lambda cmd: "--compare" in cmd, lambda line, cmd: "deepspeed" in line.lower()),
    ("issue 29 item 3: parameters of two dtypes without a bf16 or fp16 config are sent as one "
     "float32 stream by DeepSpeed (ZeRO-1/2 flatten them; it planned a stream per dtype): the "
     "deepspeed rows, and the best plan, tied with single's at the same time and bucket count, "
     "is now deepspeed's (the label breaks the tie), with its note",
     lambda cmd: len(cmd) > 1 and "mixed_bf16" in cmd[1] and "--compare" in cmd,
     lambda line, cmd: "deepspeed" in line.lower() or line.startswith(("Plan ", "note: parameters of"))
     or '"strategy": "deepspeed"' in line),
]


_ADVICE_START = (b"To get this plan", b"What to set", b"No framework setting reproduces",
                 b"In another framework, set:", b"The best gain over ", b"Within the model's error",
                 b"Beyond the model's error", b"Keep ")


def _without_advice(out: bytes) -> bytes:
    """Output with the advice left out: the text from its first line to the end (the advice
    is the last thing a plan prints), or a JSON document's ``advice`` key; and the DDP mode
    knobs where they are off (issue 24 added them: a plan document or a session lists them)."""
    import json

    sys.path.insert(0, str(ROOT))
    from tracecli.render.jsonout import dumps

    try:
        doc = json.loads(out)
    except ValueError:
        lines = out.split(b"\n")
        cut = next((k for k, line in enumerate(lines)
                    if line.startswith(_ADVICE_START) or b"(the trace's framework) cannot set" in line),
                   None)
        return out if cut is None else b"\n".join(lines[:cut])

    def drop(node: dict) -> None:
        node.pop("advice", None)
        for key in ("find_unused_parameters", "static_graph"):
            if node.get(key) is False:
                del node[key]

    _each_object(doc, drop)
    return dumps(doc).encode()


# Deliberate changes that add to an output rather than rewrite it, or that a rewrite of the
# base output cannot make: each normalises both outputs (stdout, stderr and every file) the
# same way, and what remains must be identical (what changed and why, which commands, the
# normalisation).
NORMALIZED = [
    ("issue 24 (and issue 22 item 3): the advice is a record decided in planning, rendered "
     "whole (a verdict per framework, the trace's own first; set only beyond the model's "
     "error) and in --json as \"advice\"; the DDP mode knobs (--find-unused-parameters, "
     "--static-graph) join the ddp options and the session's remembered knobs",
     lambda cmd: cmd[0] in ("plan-buckets", "status"), _without_advice),
]

# Commands whose output differs on purpose in ways no rewrite can reproduce: shown, with the
# reason, and not counted as failures.
EXPECTED = [
    ("issue 24 item 1: optimal searches the cost model's own curve (a trace's measured "
     "times, NCCL's timed pick), no longer its secant: its plan, and the best row of "
     "--compare, change where the curve is not a line (under NCCL's model its times also "
     "moved with issue 23's timed pick, merged on main after the base)",
     lambda cmd: cmd[0] == "plan-buckets" and ("--compare" in cmd or "optimal" in cmd or len(cmd) == 1)
     and any(a.endswith(".json.gz") or a == "dgx-h100" for a in cmd)),
    ("issue 24 item 4: the unused fixture (find_unused_parameters=True, bucket_cap_mb=0.01): "
     "its mode is read from the trace, observed matches its buckets by DDP's own rule, ddp "
     "plans the construction-time buckets",
     lambda cmd: any(a.endswith("unused.json.gz") for a in cmd)),
    ("issue 24 item 1: --compare never ranks a row above optimal: on the sparse sample "
     "tf-spec fuses the sparse gradient as dense (faster under the preset), and optimal takes "
     "those buckets, saying so",
     lambda cmd: cmd[0] == "plan-buckets" and "--compare" in cmd
     and any(a.endswith("embed_horovod.txt") for a in cmd)),
    ("issue 24 item 5: collective --measured names its error column by its formula, "
     "(pred-meas)/meas (its predictions also moved with issue 23's timed pick; round 9 caps "
     "the CSCS GH200 run's bands from 16 MiB at the line rate, +37% to +21%, widens them by "
     "ofi's own tables' errors, and its refit, with the Slingshot table of round 9, moves its "
     "1-4 MiB times by up to 50%)",
     lambda cmd: cmd[0] == "collective" and "--measured" in cmd),
    ("issue 24 item 1: a trace fit that fails says so without naming calibrate's options "
     "(--max-size, --iters), which plan-buckets does not have",
     lambda cmd: cmd[0] == "plan-buckets" and any(a.endswith("mixed_bf16.json.gz") for a in cmd)),
    ("issue 23 (rounds 1 and 2, merged on main after the base; round 3): NCCL's pick is "
     "timed by the fitted time model, with its error band, and NCCL's choice sees the latency "
     "a network plugin reports and the NICs as NCCL counts them; round 3 refits it on 17 "
     "tables (the NCCL versions the sources state, an NVLS latency factor apart, a transport's "
     "floor its family's) and the header names the NVLS factor; round 4 refits it on 18 "
     "tables (a second one-thread -g 8 table: one-node constants move, times by 3% at most) "
     "and `collective --measured` of a -g N run adds that thread's launches (its --help says "
     "so); round 8 refits it on 23 tables (an AWS p5 EFA table from 8 B: the efa constants "
     "and the network error bands move, and with them the advice under --platform): "
     "`collective` prints new times, bands and constants, and plans under --platform "
     "change with them (docs/nccl-time-model.md); round 9 caps a band's upper edge where it "
     "would let a run beat the NICs' line rate, and refits after modelling aws-ofi-nccl's "
     "NVLS chunk settings on p5 (the constants move by under 2%: ib's NVLS latency x1.37 -> "
     "x1.38, the dgx-h100 times by 0.2% at most; docs/nccl-time-model.md); --json's error_band"
     " adds scope, widened_by, capped, uncapped_high_pct, its old fields as they were (json.md)",
     lambda cmd: cmd[0] == "collective" or (cmd[0] == "plan-buckets" and "--platform" in cmd)),
    ("issue 26 item 3: a profiler trace recorded with module scopes (with_stack=True; "
     "tests/fixtures/kineto_modules, added after the base) names its gradients by module path "
     "and, where the layer's operator proves it, parameter (the base gave positional names), "
     "and the longer names wrap in the tables; tests/parsers/test_kineto_modules.py checks "
     "each name against torch's own answer",
     lambda cmd: any("kineto_modules" in a for a in cmd)),
    ("issue 29 item 2: a profiler trace's gradients whose shapes repeat are named by the "
     "sidecar (they kept positional names), in text laid out anew by issue 26 item 1, so "
     "neither ALLOWED's line rule nor the layout comparison alone can follow it",
     lambda cmd: len(cmd) > 1 and cmd[1].startswith(str(K)) and bool(_sidecar_names(cmd))),
]


# More deliberate changes a rewrite of the base output cannot make (new measurements),
# normalised the same way (after the advice is left out).
_COLLECTIVE_FIELDS = ("group", "seq", "peer", "splits", "out_elements", "line")
_DEVICE_NOTE = re.compile(r"\"?times: the device's .*? the host's times are not used\"?,? ?")


def _graphml_by_name(text: str) -> str:
    """GraphML with each data key named by its attribute (not its renumbered id), and the
    collective nodes' fields the model's Collective gained (issue 22 item 5) left out."""
    names = dict(re.findall(r'<key id="(d\d+)" for="node" attr.name="(\w+)"', text))
    text = re.sub(r'<key id="d\d+" for="node" attr.name="(?:group|seq|peer|splits|out_elements)"[^>]*/>\s*',
                  "", text)

    def node(m: re.Match) -> str:
        body = re.sub(r'<data key="(d\d+)">[^<]*</data>\s*',
                      lambda d: "" if names.get(d.group(1)) in _COLLECTIVE_FIELDS else d.group(0),
                      m.group(2))
        return m.group(1) + body + "</node>"

    text = re.sub(r'(<node id="c\d+">)(.*?)</node>', node, text, flags=re.S)
    return re.sub(r'(key|id)="(d\d+)"', lambda m: f'{m.group(1)}="{names.get(m.group(2), m.group(2))}"', text)


def _device_time(out: bytes) -> bytes:
    text = out.decode(errors="replace")
    if "<graphml" in text:
        text = _graphml_by_name(text)
    text = re.sub(r', "group": [^,]*, "seq": [^,]*, "peer": [^,]*, "splits": (?:null|\[\[[^\]]*\], '
                  r'\[[^\]]*\]\]), "out_elements": [^,}]*, "line": [^,}]*(?=})', "", text)
    text = " ".join(text.split())
    text = _DEVICE_NOTE.sub("", text)
    text = text.replace("its backward's kernels end on the device", "its AccumulateGrad ends")
    text = re.sub(r"\d+\.\d+(?:e-?\d+)?", "#", text)
    return " ".join(text.split()).encode()


NORMALIZED += [
    ("issue 25 item 0: on a GPU trace every time is the device's (ops, readiness, the "
     "collectives' launch and the step; the update is the device's time after backward), a "
     "note and the readiness method say so; an exported collective carries its group, seq, "
     "peer, splits, out_elements and line (issue 22 item 5): the same output with every "
     "number masked",
     lambda cmd: any(a.endswith("resnet50_ddp_nccl_2xa100.json.gz") for a in cmd)
     or cmd == ["inspect", str(S)],
     _device_time),
]


def _layout(result: tuple) -> tuple:
    """``result`` with text laid out anew compared by its words alone (issue 26 item 1: prose
    never splits a number from its unit, columns sized to their values, notices wrapped at the
    console's width): every run of spaces, newlines and rules is one space. Every value, and
    its order, is still compared; JSON is left as it is."""
    import json

    def words(text: bytes) -> bytes:
        try:
            json.loads(text)
            return text
        except ValueError:
            return re.sub(r"[\s─]+", " ", text.decode(errors="replace")).strip().encode()

    code, out, err, files = result
    return code, words(out), words(err), {n: words(body) for n, body in files.items()}


def _notices_unwrapped(err: bytes) -> bytes:
    """stderr with a notice's wrapped lines (a two-space hang, issue 26 item 1) joined again."""
    return re.sub(rb"\n  (?=\S)", b" ", err)


def normalized(cmd: list[str], result: tuple) -> tuple:
    """``result`` with every normalisation that applies to ``cmd`` (and, on stderr, notices
    as one line each: issue 26 item 1 wraps them at the console's width)."""
    code, out, err, files = result
    err = _notices_unwrapped(err)
    for _, applies, norm in NORMALIZED:
        if applies(cmd):
            out, err = norm(out), norm(err)
            files = {name: norm(body) for name, body in files.items()}
    return code, out, err, files


def intended(cmd: list[str], result: tuple) -> tuple:
    """``result`` of the base revision as the intended changes make it (stdout and files;
    stderr where an entry says so)."""
    code, out, err, files = result
    for what, applies, rewrite in INTENDED:
        if applies(cmd):
            out, err = rewrite(out), rewrite(err)  # messages moved too (issue 26 item 4)
            files = {name: rewrite(data) for name, data in files.items()}
            if what.startswith("issue 27: the strategies listed"):  # a usage error's line
                err = rewrite(err)
    return code, out, err, files


def commands() -> list[list[str]]:
    """Each command as argv after ``tracecli``; ``{out}`` is a fresh output directory."""
    cmds: list[list[str]] = []
    op_list = ["--backward-ms", "120"]
    for trace, extra in ((VGG, []), (RESNET, op_list), (A100, []), (MLP, []), (SPARSE, op_list)):
        t = str(trace)
        cmds += [["inspect", t], ["inspect", t, "--json"], ["inspect", t, "--per-gradient", "--top", "5"],
                 ["export", t, "--to", "json", "-o", "-"], ["export", t, "--to", "graphml", "-o", "-"],
                 ["plan-buckets", t, *extra], ["plan-buckets", t, "--json", *extra],
                 ["plan-buckets", t, "--compare", *extra], ["plan-buckets", t, "--compare", "--json", *extra],
                 ["plan-buckets", t, "--max-bytes", "32k", "--out", "{out}/plan.json",
                  "--chrome-trace", "{out}/trace.json", *extra],
                 ["replay", t, "--dry-run", "--network", "ib-hdr", "--gpus", "4", *extra],
                 ["replay", t, "--dry-run", "--json", "--gpus", "2", *extra]]
        for s in STRATEGIES:
            cmds.append(["plan-buckets", t, "--strategy", s, "--json", "--gpus", "16",
                         "--network", "25gbe", *extra])
        cmds.append(["plan-buckets", t, "--strategy", "optimal", "--max-bytes", "8MiB",
                     "--algorithm", "tree", "--launch-us", "20", "--gpus", "64", *extra])
    cmds += [["plan-buckets", str(RESNET), "--backward-ms", "120", "--gpus", "64", "--network",
              "25gbe", "--compare"],
             ["plan-buckets", str(RESNET), "--backward-ms", "120", "--strategy", "tf-spec", "--spec",
              "pscpu:32k:xring", "--agg-small-grads-max-bytes", "4k", "--json"],
             ["plan-buckets", str(RESNET), "--backward-ms", "120", "--strategy", "horovod",
              "--cycle-ms", "3", "--max-bytes", "16MiB"],
             ["plan-buckets", str(VGG), "--strategy", "ddp", "--max-bytes", "4MiB",
              "--first-bucket-bytes", "1MiB", "--device", "v100"],
             ["plan-buckets", str(VGG), "--strategy", "optimal", "--alpha-us", "30",
              "--bandwidth-gbps", "12", "--gpus", "32"],
             ["plan-buckets", str(A100), "--strategy", "observed"],
             ["plan-buckets", str(A100), "--strategy", "observed", "--json"],
             ["plan-buckets", str(A100), "--strategy", "observed", "--chrome-trace", "{out}/t.json"],
             ["plan-buckets", str(A100), "--compare", "--network", "nvlink-a100"],
             ["plan-buckets", str(SPARSE), "--backward-ms", "50", "--sparse-as-dense", "--strategy",
              "horovod", "--json"]]
    for k in KINETO:
        cmds += [["inspect", str(k), "--json"], ["plan-buckets", str(k), "--strategy", "observed"],
                 ["plan-buckets", str(k), "--compare"], ["plan-buckets", str(k), "--compare", "--json"]]
    for k in MODULES:
        cmds += [["inspect", str(k)], ["inspect", str(k), "--json"], ["plan-buckets", str(k), "--compare"]]
    # NCCL's model of a topology (issue 23: its times are NCCL's pick, timed)
    dgx = ["--platform", "dgx-h100", "--nccl", "2.30.7"]
    cmds += [["collective", "allreduce", "--nodes", "2", *dgx],
             ["collective", "allreduce", "--nodes", "2", "--json", *dgx],
             ["collective", "allreduce", "--measured", str(GH200), "--nodes", "2", "--nic-gbps",
              "200", "--nccl", "2.30.7"]]
    for n in ("1", "8", "128"):
        cmds += [["plan-buckets", str(VGG), "--backward-ms", "10", "--compare", "--nodes", n, *dgx],
                 ["plan-buckets", str(RESNET), "--backward-ms", "10", "--compare", "--nodes", n, *dgx]]
    # the session: inspect remembers, plan-buckets plans the remembered trace, status shows it
    cmds += [["status"], ["status", "--json"], ["plan-buckets"], ["replay", "--dry-run"]]
    # errors: one line, exit 2
    cmds += [["inspect", "/dev/null"], ["inspect", str(S)], ["plan-buckets", str(VGG), "--max-bytes", "x"],
             ["plan-buckets", str(VGG), "--strategy", "nope"], ["export", str(VGG), "--to", "json"],
             ["replay", "--plan", str(VGG), "--dry-run"], ["plan-buckets", str(VGG), "--calibration",
                                                           str(VGG)]]
    return cmds


SESSION = [["inspect", str(VGG)], ["plan-buckets", "--max-bytes", "32k"]]


def run_all(tree: Path, workdir: Path, jobs: int) -> list[tuple]:
    """Every command under ``tree``'s tracecli; each in its own directory."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "100", "NO_COLOR": "1",
           "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)

    def one(k_cmd):
        k, cmd = k_cmd
        cwd = workdir / f"c{k:03d}"
        out = cwd / "out"
        out.mkdir(parents=True)
        if cmd[0] in ("status", "replay") and len(cmd) <= 2 or cmd == ["plan-buckets"]:
            for step in SESSION:  # the session these commands read
                subprocess.run([sys.executable, "-m", "tracecli", *step], cwd=cwd, env=env,
                               capture_output=True)
        argv = [a.replace("{out}", str(out)) for a in cmd]
        p = subprocess.run([sys.executable, "-m", "tracecli", *argv], cwd=cwd, env=env,
                           capture_output=True, timeout=600)
        files = {f.name: f.read_bytes() for f in sorted(out.iterdir())}
        strip = lambda b: b.replace(str(workdir).encode(), b"<W>")  # noqa: E731
        return (p.returncode, strip(p.stdout), strip(p.stderr),
                {n: strip(b) for n, b in files.items()})

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, enumerate(commands())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE, help=f"git revision to compare with ({BASE})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--list", action="store_true", help="print the commands and stop")
    args = parser.parse_args()
    if args.list:
        for cmd in commands():
            print("tracecli " + " ".join(cmd))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="tracecli-diff-"))
    base_tree = tmp / "base"
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base_tree),
                        args.base], check=True, capture_output=True)
        before = run_all(base_tree, tmp / "before", args.jobs)
        after = run_all(ROOT, tmp / "after", args.jobs)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    differ = normal = expected = laid = 0
    for cmd, b, a in zip(commands(), before, after):
        b = intended(cmd, b)
        if a == b:
            continue
        b, a = normalized(cmd, b), normalized(cmd, a)
        b = allowed(cmd, b, a)
        if a == b:
            normal += 1
            print(f"INTENDED (normalised as NORMALIZED says): tracecli {' '.join(cmd)}")
            continue
        if _layout(a) == _layout(b):
            laid += 1
            print(f"INTENDED (laid out to fit 80 columns only, issue 26 item 1): tracecli {' '.join(cmd)}")
            continue
        why = next((why for why, applies in EXPECTED if applies(cmd)), None)
        if why is not None:
            expected += 1
            print(f"DIFFERS AS INTENDED ({why.split(':')[0]}): tracecli {' '.join(cmd)}")
        else:
            differ += 1
            print(f"DIFFERS: tracecli {' '.join(cmd)}")
        for what, x, y in (("exit", b[0], a[0]), ("stdout", b[1], a[1]), ("stderr", b[2], a[2])):
            if x != y:
                if what == "exit":
                    print(f"  exit {x} -> {y}")
                    continue
                diff = difflib.unified_diff(x.decode(errors="replace").splitlines(),
                                            y.decode(errors="replace").splitlines(), "before",
                                            "after", lineterm="", n=1)
                print("\n".join("  " + line for line in list(diff)[:40]))
        for name in sorted(set(b[3]) | set(a[3])):
            if b[3].get(name) != a[3].get(name):
                print(f"  file {name} differs")
    total = len(before)
    print(f"{total - differ - normal - laid - expected} of {total} commands identical to "
          f"{args.base}; {normal} identical once normalised as NORMALIZED says; {laid} laid out "
          f"anew only (issue 26); {expected} differ as intended (EXPECTED); {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
