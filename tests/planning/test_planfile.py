"""The plan file reader: a file written by ``plan-buckets --out`` reads back as the plan it
describes, and each thing it checks is a PlanError naming ``path:line`` and what to do."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tracecli.errors import PlanError
from tracecli.planning.planfile import load_plan_file

from conftest import FIXTURES, VGG, assert_error, run

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="replay and calibrate need torch (the replay extra)")

SPARSE = FIXTURES / "sparse" / "embed_horovod.txt"


def written(tmp_path, *args) -> tuple:
    path = tmp_path / "plan.json"
    result = run("plan-buckets", *args, "--out", path, "--force")
    assert result.exit_code == 0, result.output
    return path, json.loads(path.read_text())


def grouping(saved) -> tuple:
    """(strategy, buckets, each bucket's collective name) of a read plan file."""
    fixed = saved.fixed
    return fixed.strategy, [tuple(b) for b in fixed.buckets], [k.value for k in fixed.collectives]


@pytest.mark.parametrize("args", [
    [VGG, "--max-bytes", "32k"],
    [VGG, "--strategy", "ddp", "--update-ms", "3"],
    [SPARSE, "--backward-ms", "50", "--strategy", "horovod"],
], ids=["vgg-size", "vgg-ddp-update", "sparse-horovod"])
def test_round_trip(tmp_path, args):
    path, doc = written(tmp_path, *args)
    saved = load_plan_file(path)
    strategy, buckets, collectives = grouping(saved)
    assert strategy == doc["strategy"] and saved.doc == doc
    grads = saved.inp.grads
    assert [g.name for g in grads] == [g["name"] for g in doc["gradients"]]
    assert [g.nbytes for g in grads] == [g["bytes"] for g in doc["gradients"]]
    assert [g.ready_ms for g in grads] == [g["ready_ms"] for g in doc["gradients"]]
    assert [g.sparse for g in grads] == [g.get("sparse", False) for g in doc["gradients"]]
    assert [g.order for g in grads] == list(range(len(grads)))
    assert [[grads[i].name for i in b] for b in buckets] == [b["tensors"] for b in doc["buckets"]]
    assert collectives == [b["collective"] for b in doc["buckets"]]
    c = doc["compute"]
    assert saved.inp.forward_ms == c["forward_ms"]
    assert saved.inp.backward_end_ms == c["forward_ms"] + c["backward_ms"]
    assert saved.inp.update_ms == c["update_ms"]
    assert saved.inp.compute_source == f"plan file {path}: {c['source']}"


def test_sparse_plan_keeps_its_all_gather(tmp_path):
    path, doc = written(tmp_path, SPARSE, "--backward-ms", "50", "--strategy", "horovod")
    collectives = grouping(load_plan_file(path))[2]
    assert collectives[-1] == "allgather" and set(collectives[:-1]) == {"allreduce"}


def edit(doc: dict, change) -> dict:
    doc = json.loads(json.dumps(doc))
    change(doc)
    return doc


def g0(doc, key, value):
    doc["gradients"][0][key] = value


def dropped(key):
    return lambda d: d.pop(key)


INVALID = [  # (id, change, words the message names)
    ("no strategy", dropped("strategy"), ["no 'strategy'"]),
    ("no gradients", dropped("gradients"), ["no 'gradients'"]),
    ("no buckets", dropped("buckets"), ["no 'buckets'"]),
    ("no compute", dropped("compute"), ["no 'compute'"]),
    ("strategy not string", lambda d: d.update(strategy=3), ["strategy must be a short string"]),
    ("strategy too long", lambda d: d.update(strategy="x" * 101), ["short string"]),
    ("gradients empty", lambda d: d.update(gradients=[]), ["gradients must be a non-empty list"]),
    ("gradient not object", lambda d: d["gradients"].__setitem__(0, 1), ["gradient 0 is not an object"]),
    ("gradient unnamed", lambda d: g0(d, "name", ""), ["gradient 0 needs a name"]),
    ("bytes negative", lambda d: g0(d, "bytes", -1), ["gradient 0 ('/l2/W'): bytes must be an integer"]),
    ("bytes bool", lambda d: g0(d, "bytes", True), ["bytes must be an integer from 0 to 2^50"]),
    ("bytes too big", lambda d: g0(d, "bytes", (1 << 50) + 1), ["2^50"]),
    ("bytes float", lambda d: g0(d, "bytes", 320.0), ["bytes must be an integer"]),
    ("dtype", lambda d: g0(d, "dtype", "int8"), ["dtype must be one of float32"]),
    ("twice", lambda d: g0(d, "name", "/l1/W"), ["gradient '/l1/W' listed twice"]),
    ("sparse not bool", lambda d: g0(d, "sparse", 1), ["sparse must be true or false"]),
    ("ready missing", lambda d: d["gradients"][0].pop("ready_ms"), ["gradient 0 ready_ms must be a number"]),
    ("ready negative", lambda d: g0(d, "ready_ms", -0.5), ["ready_ms must be a number of ms from 0 to 1e+07"]),
    ("ready huge", lambda d: g0(d, "ready_ms", 1e8), ["ready_ms must be a number"]),
    ("buckets empty", lambda d: d.update(buckets=[]), ["buckets must be a non-empty list"]),
    ("bucket unknown name", lambda d: d["buckets"][0]["tensors"].append("nope"),
     ["bucket 0 must list names of the plan's gradients"]),
    ("bucket not object", lambda d: d["buckets"].__setitem__(0, ["/l2/W"]), ["bucket 0 must list"]),
    ("bucket repeats", lambda d: d["buckets"][0]["tensors"].append("/l2/W"), ["bucket 0 repeats a gradient"]),
    ("collective", lambda d: d["buckets"][0].update(collective="reducescatter"),
     ["bucket 0: collective must be allreduce or reduce_scatter, or allgather of one gradient"]),
    ("allgather of many", lambda d: d["buckets"][0].update(collective="allgather"), ["allgather of one"]),
    ("gradient in no bucket", lambda d: d["buckets"][0]["tensors"].pop(), ["some gradients are in no bucket"]),
    ("forward missing", lambda d: d["compute"].pop("forward_ms"), ["compute.forward_ms must be a number"]),
    ("backward nan", lambda d: d["compute"].update(backward_ms="NaN"), ["compute.backward_ms"]),
    ("update bool", lambda d: d["compute"].update(update_ms=True), ["compute.update_ms"]),
    ("compute too long", lambda d: d["compute"].update(forward_ms=6e6, backward_ms=6e6),
     ["forward + backward + update must not exceed 1e+07 ms"]),
]


@pytest.fixture
def mlp_plan(tmp_path):
    return written(tmp_path, FIXTURES / "mlp_chainer.txt")


@pytest.mark.parametrize("change,words", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_plan(tmp_path, mlp_plan, change, words):
    _, doc = mlp_plan
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(edit(doc, change), indent=2))
    with pytest.raises(PlanError) as err:
        load_plan_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}:1: not a valid plan file ("), message
    assert message.endswith("); make one with tracecli plan-buckets --out PLAN.json"), message
    for word in words:
        assert word in message, message


def test_not_an_object(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[1, 2]\n")
    with pytest.raises(PlanError, match=r":1: not a valid plan file \(not a JSON object\)"):
        load_plan_file(path)


@pytest.mark.parametrize("text,line,words", [
    ('{\n  "strategy": "size",\n  "gradients": [,]\n}\n', 3, ["invalid JSON"]),
    ('{\n  "strategy": "size",\n  "strategy": "ddp"\n}\n', 3, ["invalid JSON", "duplicate key"]),
    ('{"strategy": NaN}', 1, ["invalid JSON"]),
    ("", 1, ["invalid JSON"]),
])
def test_unreadable_json_names_its_line(tmp_path, text, line, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PlanError) as err:
        load_plan_file(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)
    for word in words:
        assert word in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(PlanError, match="no such file"):
        load_plan_file(tmp_path / "nope.json")


def test_replay_reports_a_bad_plan_file_in_one_line(tmp_path, mlp_plan):
    _, doc = mlp_plan
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(edit(doc, lambda d: g0(d, "dtype", "int8"))))
    assert_error(run("replay", "--plan", path, "--dry-run"), f"{path}:1:", "dtype must be one of",
                 "plan-buckets --out")


@needs_torch
def test_replay_of_a_plan_file_carries_its_options(tmp_path):
    """replay --json has the plan's own keys and values (issue 17 item 11): max_bytes, the
    options, and the settings that reproduce it, not the command line's defaults."""
    path, saved = written(tmp_path, VGG, "--strategy", "ddp", "--max-bytes", "8MiB", "--gpus", "2",
                            "--network", "nvlink-h100")
    result = run("replay", "--plan", path, "--dry-run", "--json", "--gpus", "2", "--network",
                 "nvlink-h100")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for key in ("strategy", "max_bytes", "gpus", "options", "settings", "buckets", "predicted",
                "gradients", "cost_model"):
        assert doc[key] == saved[key], key
    assert doc["settings"]["text"] == "DistributedDataParallel(model, bucket_cap_mb=8)"


@pytest.mark.parametrize("change,words", [
    (lambda d: d.update(max_bytes=0), "max_bytes must be null or a byte count"),
    (lambda d: d["options"].update(cycle_ms=-1), "cycle_ms must be a number of ms"),
    (lambda d: d["options"].update(spec=7), "spec must be a string"),
    (lambda d: d["options"].update(sparse_as_dense="yes"), "sparse_as_dense must be true or false"),
    (lambda d: d.update(options=[]), "options must be an object"),
])
def test_plan_file_options_are_checked(tmp_path, change, words):
    path, saved = written(tmp_path, VGG)
    change(saved)
    path.write_text(json.dumps(saved))
    assert_error(run("replay", "--plan", path, "--dry-run"), str(path), words)
