"""A parameter's marks (``model.ParamMeta``: Megatron's ``expert`` and ``shared_embedding``,
DeepSpeed's ``comm_dtype``): read by every parser that takes a parameter sidecar or list,
carried by reference to planning and through plan files, never dropped silently; and the
parameter list as an input of its own."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, assert_error, run
from tracecli import load_trace
from tracecli.analysis import readiness
from tracecli.errors import SizesError
from tracecli.model import NO_META, ParamMeta
from tracecli.parsers import LoadOptions, load
from tracecli.pipeline import ComputeRequest, inputs
from tracecli.planning.planfile import load_plan_file

TRUTH = FIXTURES / "megatron" / "truth"
OP_LIST = ComputeRequest(backward_ms=100.0)


def moe_op_list():
    return load(TRUTH / "moe.ops.txt", LoadOptions(sizes=str(TRUTH / "moe.sizes.json")))


@pytest.mark.parametrize("trace_of", [
    moe_op_list, lambda: load(TRUTH / "moe.sizes.json"),
    lambda: load_trace(FIXTURES / "megatron" / "mc_moe.json.gz")], ids=["op-list", "params", "trace"])
def test_the_marks_are_one_record_carried_by_reference(trace_of):
    """The record the parser read is the very object readiness and planning hold."""
    trace = trace_of()
    ready, _, inp = inputs(trace, OP_LIST)
    tensors = {t.name: t for t in trace.parameters()}
    experts = [g for g in inp.grads if g.meta.expert]
    assert len(experts) == 24
    for g in inp.grads:
        assert g.meta is tensors[g.name].meta
    for r in ready.gradients:
        assert r.meta is tensors[r.name].meta
    assert sum(t.meta is NO_META for t in tensors.values()) == len(tensors) - len(experts)


def test_a_plan_file_keeps_the_marks(tmp_path):
    out = tmp_path / "plan.json"
    result = run("plan-buckets", str(TRUTH / "moe.sizes.json"), "--strategy", "megatron",
                 "--gpus", "8", "--megatron-expert-dp", "4", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert sum(g.get("expert", False) for g in doc["gradients"]) == 24
    saved = load_plan_file(out)
    assert sum(g.meta.expert for g in saved.inp.grads) == 24
    doc["gradients"][0]["comm_dtype"] = "int7"
    out.write_text(json.dumps(doc))
    assert_error(run("replay", "--plan", str(out), "--dry-run"), f"{out}:1:", "comm_dtype must be a dtype")


def test_the_sidecar_checks_each_mark_at_its_line(tmp_path):
    side = tmp_path / "x.sizes.json"
    side.write_text('[\n {"name": "a", "shape": [2], "dtype": "torch.float32"},\n'
                    ' {"name": "b", "shape": [2], "dtype": "float32", "comm_dtype": 7}\n]\n')
    with pytest.raises(SizesError) as err:
        load(side)
    assert str(err.value).startswith(f"{side}:3:") and "comm_dtype" in str(err.value)
    side.write_text('[{"name": "a", "shape": [2], "dtype": "torch.float32", "comm_dtype": "torch.bfloat16"}]')
    (t,) = load(side).parameters()
    assert (t.dtype, t.meta) == ("float32", ParamMeta(comm_dtype="bfloat16"))


def test_marks_a_trace_without_shapes_cannot_use_are_an_error(tmp_path):
    """A profile without record_shapes cannot say which gradient is which parameter: a
    sidecar that marks one is refused at that parameter's line, not silently unused."""
    trace = shutil.copy(FIXTURES / "kineto" / "mlp_noshapes.json.gz", tmp_path / "t.json.gz")
    side = json.loads((FIXTURES / "kineto" / "mlp_noshapes.sizes.json").read_text())
    side[2]["expert"] = True
    path = tmp_path / "t.sizes.json"
    path.write_text(json.dumps(side, indent=1))
    line = path.read_text().splitlines().index(' {') + 1  # the first entry's line
    result = run("inspect", trace)
    assert_error(result, f"{path}:", "records no shapes", side[2]["name"], "record_shapes=True")
    assert int(result.stderr.split(":")[1]) > line  # the marked entry's own line
    del side[2]["expert"]
    path.write_text(json.dumps(side))
    assert run("inspect", trace).exit_code == 0  # no marks: names are not attached, said in a note


def test_marks_of_parameters_a_trace_cannot_tell_apart_are_an_error(tmp_path):
    """``unused``: one gradient of [64] float32 for two such parameters (``a.bias``, and
    ``unused.bias``, which got none): which one ran is not in the trace; if the two carry
    different marks, the marks cannot be given."""
    trace = shutil.copy(FIXTURES / "kineto" / "unused.json.gz", tmp_path / "u.json.gz")
    side = json.loads((FIXTURES / "kineto" / "unused.sizes.json").read_text())
    marked = next(p for p in side if p["shape"] == [64])
    marked["comm_dtype"] = "bfloat16"
    (tmp_path / "u.sizes.json").write_text(json.dumps(side))
    assert_error(run("inspect", trace), f"{tmp_path / 'u.sizes.json'}:", "[64] float32",
                 "carry different marks", marked["name"])
    for p in side:  # the same marks on both: the gradient gets them
        if p["shape"] == [64]:
            p["comm_dtype"] = "bfloat16"
    (tmp_path / "u.sizes.json").write_text(json.dumps(side))
    grads = readiness(load_trace(trace)).gradients
    assert [g.meta.comm_dtype for g in grads if g.shape == (64,)] == ["bfloat16"]


def test_a_wrong_sidecar_is_refused_saying_which_shapes_disagree(tmp_path):
    trace = shutil.copy(FIXTURES / "megatron" / "mc_tiny.json.gz", tmp_path / "t.json.gz")
    side = json.loads((FIXTURES / "megatron" / "mc_tiny.sizes.json").read_text())
    twice = side + [dict(p, name=p["name"] + "_copy") for p in side]  # every shape twice as often
    (tmp_path / "t.sizes.json").write_text(json.dumps(twice))
    assert_error(run("inspect", trace), f"{tmp_path / 't.sizes.json'}:1:",
                 "come in other numbers than the sidecar's")
    (tmp_path / "t.sizes.json").write_text(json.dumps([dict(p, dtype="float16") for p in side]))
    assert_error(run("inspect", trace), f"{tmp_path / 't.sizes.json'}:1:",
                 "no parameter matches a gradient", "float32")
    (tmp_path / "t.sizes.json").write_text(json.dumps(side[:-3]))  # three short: the rest named
    notes = " ".join(load_trace(trace).meta.notes)
    assert "other numbers than the sidecar's (e.g. 690 gradients and 688 parameters of [1] float32)" in notes
    assert sum(not g.name.startswith("grad") for g in readiness(load_trace(trace)).gradients) > 0


# -- the parameter list as an input ------------------------------------------------------------

def test_a_parameter_list_is_a_model_without_a_profile(tmp_path):
    params = tmp_path / "params.json"
    params.write_text(json.dumps([
        {"name": "embed.weight", "shape": [100, 8], "dtype": "torch.float32"},
        {"name": "proj.weight", "shape": [8, 8], "dtype": "torch.bfloat16"},
        {"name": "experts.0.weight", "shape": [8, 32], "dtype": "torch.bfloat16", "expert": True}]))
    result = run("plan-buckets", str(params), "--strategy", "megatron", "--gpus", "4", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["compute"]["source"].startswith("a model without a profile")
    assert [b["tensors"] for b in doc["buckets"]] == [["embed.weight"], ["proj.weight"], ["experts.0.weight"]]
    scaled = run("plan-buckets", str(params), "--backward-ms", "30", "--json")
    compute = json.loads(scaled.stdout)["compute"]
    assert compute["backward_ms"] == pytest.approx(30.0) and "in proportion to their bytes" in compute["source"]
    ready = readiness(load(params)).gradients  # the reverse of the list, what Megatron assumes
    assert [g.name for g in ready] == ["experts.0.weight", "proj.weight", "embed.weight"]
    assert_error(run("inspect", str(params), "--sizes", str(params)), f"{params}:", "its own")
    assert_error(run("inspect", str(params), "--step", "2"), f"{params}:", "--step")
    entries = json.loads(params.read_text())
    params.write_text(json.dumps(entries + entries[1:2], indent=1))
    fourth = [k for k, line in enumerate(params.read_text().splitlines(), 1) if line == " {"][3]
    assert_error(run("inspect", str(params)), f"{params}:{fourth}:", "proj.weight", "listed twice")


def test_a_json_list_that_is_no_parameter_list_says_what_each_format_is(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('[1, 2, 3]\n')
    assert_error(run("inspect", str(path)), f"{path}:1:", "cannot tell the trace format",
                 "name, shape and dtype")


def test_the_documented_one_liners_write_what_tracecli_reads(tmp_path, monkeypatch):
    """Each one-line writer of ``docs/inputs.md``, run on a model with the attributes the
    frameworks set (Megatron's ``allreduce``/``shared_embedding``, DeepSpeed's engine), writes
    a parameter list tracecli reads with its marks."""
    import re

    torch = pytest.importorskip("torch")
    from conftest import ROOT

    lines = re.findall(r"```python\n(json\.dump.*?)\n```", (ROOT / "docs" / "inputs.md").read_text())
    assert len(lines) == 3
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4))
    model[0].weight.shared_embedding = True
    model[1].bias.allreduce = False

    class Optimizer:
        @staticmethod
        def get_param_comm_dtype(p):
            return torch.bfloat16 if p.dim() == 2 and p.shape[0] == 4 else p.dtype

    class Engine:
        module, optimizer = model, Optimizer()

    monkeypatch.chdir(tmp_path)
    for line in lines:
        exec(line, {"json": json, "model": model, "engine": Engine()})
        params = load(tmp_path / "trace.sizes.json").parameters()
        assert [t.name for t in params] == ["0.weight", "1.weight", "1.bias"]
        assert all(t.dtype == "float32" for t in params)
    marks = [t.meta for t in params]
    assert marks == [NO_META, ParamMeta(comm_dtype="bfloat16"), NO_META]
    exec(lines[1], {"json": json, "model": model})
    assert [t.meta for t in load(tmp_path / "trace.sizes.json").parameters()] == \
        [ParamMeta(shared_embedding=True), NO_META, ParamMeta(expert=True)]
