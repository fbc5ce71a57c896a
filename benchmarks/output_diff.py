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
the change meant to, so what remains must still be identical.
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

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("options"), dict) and isinstance(node.get("strategy"), str):
                spec = STRATEGIES.get(node["strategy"])
                read = {k.name for k in spec.knobs} if spec is not None else set()
                kept = {k: v for k, v in node["options"].items() if k in read}
                if kept != node["options"]:
                    node["options"] = kept
                    changed.append(True)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
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
    lambda cmd: True, _own_options))


# Deliberate changes a rewrite of the base output cannot make (new measurements): each
# normalises both outputs (stdout, stderr and every file) the same way, and what remains must
# be identical. (what changed and why, which commands, the normalisation)
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


NORMALIZED = [
    ("issue 25 item 0: on a GPU trace every time is the device's (ops, readiness, the "
     "collectives' launch and the step; the update is the device's time after backward), a "
     "note and the readiness method say so; an exported collective carries its group, seq, "
     "peer, splits, out_elements and line (issue 22 item 5): the same output with every "
     "number masked",
     lambda cmd: any(a.endswith("resnet50_ddp_nccl_2xa100.json.gz") for a in cmd)
     or cmd == ["inspect", str(S)],
     _device_time),
]


def normalized(cmd: list[str], result: tuple) -> tuple:
    """``result`` with every normalisation that applies to ``cmd``."""
    code, out, err, files = result
    for _, applies, norm in NORMALIZED:
        if applies(cmd):
            out, err = norm(out), norm(err)
            files = {name: norm(body) for name, body in files.items()}
    return code, out, err, files


def intended(cmd: list[str], result: tuple) -> tuple:
    """``result`` of the base revision as the intended changes make it (stdout and files)."""
    code, out, err, files = result
    for _, applies, rewrite in INTENDED:
        if applies(cmd):
            out = rewrite(out)
            files = {name: rewrite(data) for name, data in files.items()}
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
    differ = normal = 0
    for cmd, b, a in zip(commands(), before, after):
        b = intended(cmd, b)
        if a == b:
            continue
        if normalized(cmd, a) == normalized(cmd, b):
            normal += 1
            print(f"INTENDED (numbers masked): tracecli {' '.join(cmd)}")
            continue
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
    print(f"{total - differ - normal} of {total} commands identical to {args.base}; {normal} "
          f"identical once normalised as NORMALIZED says; {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
