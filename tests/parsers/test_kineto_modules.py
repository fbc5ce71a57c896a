"""Gradient names from a profiler trace's own module scopes, against torch's answers.

The fixtures come from ``tests/fixtures/kineto_modules/generate.py``: torch 2.13 on CPU,
profiled with ``with_stack=True`` (an MLP, a CNN with BatchNorm and residual blocks, a
model with a tied embedding, a frozen layer and a parameter of its own, and the CNN under
DDP on 2 gloo ranks, a user's classes called ``Linear`` and ``Embedding``, two blocks under
reentrant activation checkpointing). ``NAME.torch.json`` holds what torch said in the same run: the ready
order (``register_post_accumulate_grad_hook``) and, per parameter, its owning module, its
attribute and the modules from the model down to it numbered as torch's Python tracer
numbers them (``Class_N``, from forward pre-hooks).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil

import pytest

from tracecli import LoadOptions, load_trace, readiness

from conftest import FIXTURES, assert_error, run

HERE = FIXTURES / "kineto_modules"
CASES = ["mlp", "convbn", "tied_frozen", "ddp_convbn", "impostors", "ckpt_reentrant"]
ROLE_CLASSES = {"Linear", "Conv2d", "Embedding"}  # in these models, of parsers/kineto_roles.py
# gradients of a layer whose role the trace cannot prove, and why (from the model's shapes):
NO_ROLE = {("tied_frozen", "hidden.weight"): "its input, 32 tokens of 32, is [32,32] like the weight"}


def answers(case: str) -> dict:
    return json.loads((HERE / f"{case}.torch.json").read_text())


def alone(case: str):
    """The trace without its sidecar (which is not named to be found beside it)."""
    return HERE / f"{case}.json.gz"


def with_sidecar(case: str):
    return load_trace(HERE / f"{case}.json.gz", LoadOptions(sizes=str(HERE / f"{case}.params.json")))


def expected_names(case: str) -> list[str]:
    """What the rule must give each gradient in ready order, from torch's own answers: the
    owner's chain of modules without the ones every gradient's module sits in, then the
    attribute where torch's own layer's operator proves it, else the positional name; a
    gradient accumulated in a reentrant backward (torch's graph task id differs) keeps its
    positional name."""
    a = answers(case)
    reentrant = set(a.get("reentrant", ()))
    params = {p["name"]: p for p in a["named_parameters"] if p["name"] not in reentrant}
    chains = [params[n]["chain"] for n in a["ready_order"] if n in params]
    parents = [c[:-1] for c in chains]
    common = 0
    while all(len(p) > common and p[common] == parents[0][common] for p in parents):
        common += 1
    out = []
    for k, n in enumerate(a["ready_order"]):
        p = params.get(n)
        if p is None:  # held by no module, used outside every module's forward; or reentrant
            free = next(f for f in a.get("outside_modules", []) + a.get("checkpoint_inputs", []) + [
                q for q in a["named_parameters"] if q["name"] in reentrant] if f["name"] == n)
            out.append(f"grad{k}[{','.join(map(str, free['shape']))}]")
            continue
        path = "/".join(p["chain"][common:])
        # the four first fixtures predate module_type: their layers are all torch's (generate.py)
        if p["module_class"] in ROLE_CLASSES and p.get("module_type", "torch.nn.modules.").startswith("torch.nn.modules.") \
                and (case, n) not in NO_ROLE:
            out.append(f"{path}.{p['attr']}")
        else:
            out.append(f"{path}:grad{k}[{','.join(map(str, p['shape']))}]")
    return out


@pytest.mark.parametrize("case", CASES)
def test_names_are_torch_s_modules_and_parameters(case, tmp_path):
    ready = readiness(load_trace(alone(case)))
    assert [g.name for g in ready.gradients] == expected_names(case)
    a = answers(case)
    params = {p["name"]: p for p in a["named_parameters"] + a.get("outside_modules", []) + a.get("checkpoint_inputs", [])}
    assert len(ready.gradients) == len(a["ready_order"])
    for g, n in zip(ready.gradients, a["ready_order"]):
        assert list(g.shape) == params[n]["shape"]


def test_the_cases_cover_what_the_rule_must_keep_apart():
    """A tied weight (held by two modules), frozen parameters (no gradient), a parameter of
    the model itself, one no module holds, BatchNorm's weight and bias (one shape), DDP's
    wrapper."""
    tied = {p["name"]: p for p in answers("tied_frozen")["named_parameters"]}
    assert tied["embed.weight"]["held_by"] == ["embed.weight", "decoder.weight"]
    frozen = [n for n, p in tied.items() if not p["requires_grad"]]
    assert frozen == ["frozen.weight", "frozen.bias"]
    assert not set(frozen) & set(answers("tied_frozen")["ready_order"])
    assert tied["scale"]["module"] == ""
    assert [f["name"] for f in answers("tied_frozen")["outside_modules"]] == ["free"]
    assert "free" in answers("tied_frozen")["ready_order"]
    ddp = answers("ddp_convbn")["named_parameters"][0]["chain"]
    assert ddp[0] == "DistributedDataParallel_0" and answers("ddp_convbn")["ranks"] == 2


def test_ddp_and_one_process_give_the_same_names(tmp_path):
    one = [g.name for g in readiness(load_trace(alone("convbn"))).gradients]
    ddp = [g.name for g in readiness(load_trace(alone("ddp_convbn"))).gradients]
    assert one == ddp and "Sequential_0/Block_0/Conv2d_1.weight" in one


@pytest.mark.parametrize("case", CASES)
def test_the_sidecar_wins_and_agrees(case, tmp_path):
    """With its sidecar each gradient gets torch's own name; that parameter's module, as
    torch numbers it, is the module the trace's scopes named."""
    by_sidecar = readiness(with_sidecar(case)).gradients
    by_scopes = readiness(load_trace(alone(case))).gradients
    params = {p["name"]: p for p in answers(case)["named_parameters"]}
    # a leaf that is no parameter (reentrant checkpointing's detached input) is set aside:
    # no parameter of the sidecar has its shape (tests/parsers/test_kineto_ckpt.py)
    ready = answers(case)["ready_order"]
    assert [g.name for g in by_sidecar] == [n for n in ready if n in params] or case == "tied_frozen"
    by_scopes = [own for own, n in zip(by_scopes, ready) if n in params or case == "tied_frozen"]
    for side, own in zip(by_sidecar, by_scopes, strict=True):
        if side.name in params:
            # the scopes' module, where they name one (a reentrant backward's: none)
            assert own.layer is None or params[side.name]["chain"][-1] == own.layer.split("/")[-1]
        else:  # the sidecar could not tell: the trace's module name stays
            assert side.name == own.name


def test_tied_frozen_with_its_sidecar_keeps_module_names_where_it_cannot_tell():
    """Three [32] parameters (hidden.bias, frozen.bias, scale) but two [32] gradients, two
    [32,32] parameters but one gradient: the sidecar cannot say which; the scopes can. The
    parameter no module holds is in neither: it keeps its positional name."""
    names = [g.name for g in readiness(with_sidecar("tied_frozen")).gradients]
    assert names == ["grad0[7]", "decoder.bias", "TiedFrozen_0:grad2[32]", "TiedFrozen_0/Linear_0.bias",
                     "TiedFrozen_0/Linear_0:grad4[32,32]", "embed.weight"]


def test_a_trace_without_module_scopes_keeps_positional_names(tmp_path):
    path = shutil.copy(FIXTURES / "kineto" / "mlp_default.json.gz", tmp_path / "t.json.gz")
    names = [g.name for g in readiness(load_trace(path)).gradients]
    assert all(re.fullmatch(r"grad\d+\[[\d,]+\]", n) for n in names)


def test_the_note_says_where_names_come_from(tmp_path):
    notes = load_trace(alone("convbn")).meta.notes
    assert any("module scopes" in n and "8 of 18 gradients by module and parameter" in n for n in notes)


def test_a_reentrant_backward_s_gradients_keep_positional_names():
    """``use_reentrant=True`` runs each checkpointed block's forward and backward again
    inside ``CheckpointFunctionBackward``: what the thread ran before those gradients is the
    outer graph's (the head's ``TBackward0``), and the inner graph also accumulates the
    block's detached input, a leaf that is no parameter. Torch's graph task ids say which
    were accumulated there; tracecli names them by position only, and names the rest."""
    a = answers("ckpt_reentrant")
    trace = load_trace(alone("ckpt_reentrant"))
    names = [g.name for g in readiness(trace).gradients]
    inner = [k for k, n in enumerate(a["ready_order"]) if n in a["reentrant"]]
    assert len(inner) == 10 and [f["name"] for f in a["checkpoint_inputs"]] == ["<input of blocks.1>",
                                                                               "<input of blocks.0>"]
    assert all(re.fullmatch(r"grad\d+\[[\d,]+\]", names[k]) for k in inner)
    assert [n for k, n in enumerate(names) if k not in inner] == [
        "Linear_5.bias", "Linear_5.weight", "Linear_0.bias", "Linear_0.weight"]
    assert any("4 of 14 gradients by module and parameter, 0 by module and position, 10 by position" in n
               for n in trace.meta.notes)


def test_the_sidecar_names_a_reentrant_backward_s_gradients_by_their_own_backward_ops():
    """Each op of the inner graph readies its own gradients (``AddmmBackward0``: a bias and
    the block's input; ``TBackward0``: a weight): counted so, the sidecar's rule gives
    torch's names; counted as one op (``CheckpointFunctionBackward``) it swapped ``l1`` and
    ``l2`` of each block."""
    names = [g.name for g in readiness(with_sidecar("ckpt_reentrant")).gradients]
    assert names[2:6] == ["blocks.1.l2.bias", "blocks.1.l2.weight", "blocks.1.l1.bias", "blocks.1.l1.weight"]


def test_a_user_s_class_named_like_torch_s_layer_gets_no_attribute():
    """``user.Linear`` (``F.linear(x, self.w, self.b)``) and ``user.Embedding``
    (``F.embedding(tokens, self.table)``) run torch's operators in their own scopes ``Linear_0``
    and ``Embedding_0``, but not from torch's ``forward``: naming their gradients ``.weight``
    and ``.bias`` would invent names (theirs are ``w``, ``b``, ``table``)."""
    names = [g.name for g in readiness(load_trace(alone("impostors"))).gradients]
    assert names == ["Sequential_0/Linear_0.bias", "Sequential_0/Linear_0.weight", "Linear_0:grad2[6]",
                     "Linear_0:grad3[6,10]", "Embedding_0:grad4[40,10]"]
    types = {p["name"]: p["module_type"] for p in answers("impostors")["named_parameters"]}
    assert types["proj.w"].endswith("user.Linear") and types["head.0.weight"] == "torch.nn.modules.linear.Linear"


def test_without_torch_s_forward_frames_no_attribute_is_read(tmp_path):
    """The MLP's ``torch/nn/modules/linear.py(N): forward`` frames renamed as a user's file:
    each gradient keeps its module, and no attribute is given."""
    def change(events):
        for e in events:
            if e.get("cat") == "python_function" and e["name"].startswith("torch/nn/modules/linear.py("):
                e["name"] = "model.py(12): forward"
        return 0
    path, _ = rewritten(tmp_path, change)
    names = [g.name for g in readiness(load_trace(path)).gradients]
    assert [n.split(":")[0] for n in names] == [n.rsplit(".", 1)[0] for n in expected_names("mlp")]
    assert all(re.fullmatch(r"Linear_\d:grad\d+\[[\d,]+\]", n) for n in names)


def rewritten(tmp_path, change) -> tuple:
    """The MLP's trace with ``change(events)`` applied, one event a line (event i on line
    i + 2); returns the path and the line of the event ``change`` names by its index."""
    doc = json.loads(gzip.open(HERE / "mlp.json.gz", "rt").read())
    events = doc.pop("traceEvents")
    at = change(events)
    path = tmp_path / "mlp.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n],\n"
                    + json.dumps(doc)[1:] + "\n")
    return path, at + 2


def first(events, name: str) -> int:
    return next(i for i, e in enumerate(events) if e.get("name") == name)


def renamed(new: str):
    def change(events):
        i = first(events, "nn.Module: Linear_1")
        events[i]["name"] = new
        return i
    return change


@pytest.mark.parametrize("bad,word", [
    ("nn.Module: Linear", "Class_N"), ("nn.Module: 9Linear_1", "Class_N"), ("nn.Module: ", "Class_N"),
    ("nn.Module: Lin ear_1", "Class_N"), ("nn.Module: Linear_12345678901234", "billion"),
])
def test_a_malformed_module_scope_is_one_line(tmp_path, bad, word):
    path, line = rewritten(tmp_path, renamed(bad))
    assert_error(run("inspect", path), f"{path}:{line}:", word)


def test_scopes_that_overlap_without_nesting_are_one_line(tmp_path):
    """The MLP's first Linear scope made to end after the model's."""
    def change(events):
        outer = first(events, "nn.Module: MLP_0")
        inner = next(i for i, e in enumerate(events) if e.get("name") == "nn.Module: Linear_0"
                     and e["ts"] > events[outer]["ts"])
        events[inner]["dur"] = events[outer]["ts"] + events[outer]["dur"] - events[inner]["ts"] + 5
        return inner
    path, line = rewritten(tmp_path, change)
    assert_error(run("inspect", path), f"{path}:{line}:", "nest")


def test_a_module_scope_s_bad_time_is_one_line(tmp_path):
    def change(events):
        i = first(events, "nn.Module: Linear_1")
        events[i]["ts"] = "soon"
        return i
    path, line = rewritten(tmp_path, change)
    assert_error(run("inspect", path), f"{path}:{line}:", "ts")


def test_python_ids_are_not_read(tmp_path):
    """Scopes nest by time, as the tracer recorded the calls; the ``Python parent id`` args
    (each event's nearest enclosing Python event) are not read, so cyclic, dangling or
    non-numeric ids change nothing."""
    for parent in (lambda e: e["args"]["Python id"], lambda e: 10**30, lambda e: "x"):
        def change(events):
            for e in events:
                if e.get("cat") == "python_function":
                    e["args"]["Python parent id"] = parent(e)
            return 0
        path, _ = rewritten(tmp_path, change)
        assert [g.name for g in readiness(load_trace(path)).gradients] == expected_names("mlp")


def test_a_layer_operator_with_bad_shapes_is_one_line(tmp_path):
    def change(events):
        i = first(events, "aten::linear")
        events[i]["args"]["Input Dims"][1] = [-1, 64]
        return i
    path, line = rewritten(tmp_path, change)
    assert_error(run("inspect", path), f"{path}:{line}:", "Input Dims")


def test_names_that_would_clash_keep_path_and_position(tmp_path):
    """Two scopes of one name (two classes called ``Linear``, counted apart by the tracer)
    would give two gradients the name ``Linear_0.weight``: neither gets it."""
    def change(events):
        i = first(events, "nn.Module: Linear_1")
        for e in events:
            if e.get("name") == "nn.Module: Linear_1":
                e["name"] = "nn.Module: Linear_0"
        return i
    path, _ = rewritten(tmp_path, change)
    names = [g.name for g in readiness(load_trace(path)).gradients]
    assert names == ["Linear_2.bias", "Linear_2.weight", "Linear_0:grad2[128]",
                     "Linear_0:grad3[128,128]", "Linear_0:grad4[128]", "Linear_0:grad5[128,64]"]


def test_without_the_forward_backward_links_names_stay_positional(tmp_path):
    """The flows tie a backward op to its forward op; without them nothing ties a gradient
    to a module, and no name is made up."""
    def change(events):
        events[:] = [e for e in events if e.get("cat") != "fwdbwd"]
        return 0
    path, _ = rewritten(tmp_path, change)
    trace = load_trace(path)
    assert all(re.fullmatch(r"grad\d+\[[\d,]+\]", g.name) for g in readiness(trace).gradients)
    assert any("--sizes FILE" in n for n in trace.meta.notes)
