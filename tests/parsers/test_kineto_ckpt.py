"""Reentrant checkpointing's detached inputs, against torch's answers.

``torch.utils.checkpoint(..., use_reentrant=True)`` accumulates, inside each block's
``CheckpointFunctionBackward``, the block's detached inputs: leaves that are no parameter.
The fixtures (``tests/fixtures/kineto_modules/generate.py``: ``ckpt_reentrant``;
``generate_ckpt.py``: the rest) are real torch 2.13 CPU runs; ``NAME.torch.json`` holds
what torch said in the same run: the ready order of parameters and of those leaves
(``checkpoint_inputs``, found by forward pre-hooks), and each one's graph task.
tracecli sets a leaf aside only on evidence it is no parameter (DDP's reducer hook, or no
parameter of the sidecar having its shape), and keeps, with a note, what it cannot tell.
"""

from __future__ import annotations

import gzip
import json
import math

import pytest

from tracecli import LoadOptions, load_trace, readiness

from conftest import FIXTURES, assert_error, run

HERE = FIXTURES / "kineto_modules"
CASES = ["ckpt_reentrant", "ckpt_square", "ckpt_two_inputs", "ckpt_nested", "ckpt_swap", "ckpt_ddp",
         "ckpt_nonreentrant"]


def answers(case: str) -> dict:
    return json.loads((HERE / f"{case}.torch.json").read_text())


def load(case: str, sidecar: bool):
    options = LoadOptions(sizes=str(HERE / f"{case}.params.json")) if sidecar else LoadOptions()
    return load_trace(HERE / f"{case}.json.gz", options)


def sig(entry: dict) -> tuple:
    return tuple(entry["shape"]), entry["dtype"]


def expected_aside(case: str, sidecar: bool) -> set[str]:
    """The checkpoint inputs the evidence shows are no parameter, from torch's answers: under
    DDP (``ranks`` > 1) every one (DDP's hook runs on parameters only); with the sidecar those
    whose shape and dtype no parameter of ``named_parameters()`` has; else none."""
    a = answers(case)
    inputs = a.get("checkpoint_inputs", [])
    if a["ranks"] > 1:
        return {f["name"] for f in inputs}
    if sidecar:
        shapes = {sig(p) for p in a["named_parameters"]}
        return {f["name"] for f in inputs if sig(f) not in shapes}
    return set()


def note(trace) -> str:
    found = [n for n in trace.meta.notes if n.startswith("checkpoint inputs:")]
    assert len(found) <= 1
    return found[0] if found else ""


@pytest.mark.parametrize("sidecar", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_what_is_set_aside_is_what_torch_says_is_no_parameter(case, sidecar):
    """The gradients, in ready order, are torch's ready order less the leaves set aside:
    never a parameter, and every checkpoint input the evidence shows."""
    a = answers(case)
    entries = {e["name"]: e for e in a["named_parameters"] + a.get("checkpoint_inputs", [])}
    aside = expected_aside(case, sidecar)
    trace = load(case, sidecar)
    kept = [n for n in a["ready_order"] if n not in aside]
    gradients = readiness(trace).gradients
    assert [(tuple(g.shape), g.dtype) for g in gradients] == [sig(entries[n]) for n in kept]
    assert set(kept) >= {n for n in a["ready_order"] if n in {p["name"] for p in a["named_parameters"]}}
    if sidecar and kept == [n for n in a["ready_order"] if not n.startswith("<")]:
        assert [g.name for g in gradients] == kept  # every gradient torch's name
    text = note(trace)
    assert (f"{len(aside)} set aside" in text) == bool(aside)


@pytest.mark.parametrize("sidecar", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_the_note_counts_the_leaves_that_may_still_be_inputs(case, sidecar):
    """Kept, with a note: every leaf of a reentrant backward that has the shape and dtype of
    a checkpoint input, unless the evidence settled it (torch's answers count them)."""
    a = answers(case)
    entries = {e["name"]: e for e in a["named_parameters"] + a.get("checkpoint_inputs", [])}
    inputs = {sig(f) for f in a.get("checkpoint_inputs", [])}
    settled = {sig(entries[n]) for n in expected_aside(case, sidecar)}  # a shape no parameter has
    maybe = 0 if a["ranks"] > 1 else sum(sig(entries[n]) in inputs - settled for n in a.get("reentrant", []))
    text = note(load(case, sidecar))
    assert (f"{maybe} kept as gradients but may be checkpoint inputs" in text) == bool(maybe), text
    if maybe:
        assert ("the sidecar cannot tell" in text) == sidecar


def test_the_cases_are_the_adversarial_ones():
    """Torch's answers: a [12,12] input among [12,12] weights; a [6,12] input beside a [6,12]
    parameter and a second input that requires no gradient (not accumulated); nested
    checkpoints (depth 2); DDP over 2 ranks; non-reentrant checkpointing accumulates no leaf
    but the parameters."""
    square = answers("ckpt_square")
    assert {sig(f) for f in square["checkpoint_inputs"]} == {((12, 12), "float32")}
    assert sum(sig(p) == ((12, 12), "float32") for p in square["named_parameters"]) == 4
    two = answers("ckpt_two_inputs")
    assert [f["name"] for f in two["checkpoint_inputs"]] == ["<input of block>"]
    assert ((6, 12), "float32") in {sig(p) for p in two["named_parameters"]}
    nested = answers("ckpt_nested")
    assert max(nested["graph_tasks"]) == 2 and len(nested["checkpoint_inputs"]) == 2
    assert answers("ckpt_ddp")["ranks"] == 2
    plain = answers("ckpt_nonreentrant")
    assert plain["checkpoint_inputs"] == [] and plain["reentrant"] == [] and set(plain["graph_tasks"]) == {0}


def test_the_trace_cannot_tell_h_at_w_from_w_at_h():
    """``h @ w`` accumulates the input first, ``w @ h`` second (torch's ready order); the two
    reentrant backwards' events are the same ops with the same shapes, so no rule on the
    trace's events can say which [12,12] leaf is the input: both stay, with the note."""
    order = answers("ckpt_swap")["ready_order"]
    first, second = order[2:4], order[4:6]
    assert first == ["blocks.1.w", "<input of blocks.1>"] and second == ["<input of blocks.0>", "blocks.0.w"]
    doc = json.loads(gzip.open(HERE / "ckpt_swap.json.gz", "rt").read())
    blocks = [e for e in doc["traceEvents"] if e.get("name") == "autograd::engine::evaluate_function: "
              "CheckpointFunctionBackward" and e.get("ph") == "X"]

    def inside(block):
        return [(e["name"], e.get("args", {}).get("Input Dims")) for e in sorted(
            doc["traceEvents"], key=lambda e: (e.get("ts", 0), -e.get("dur", 0)))
            if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["tid"] == block["tid"]
            and block["ts"] <= e["ts"] and e["ts"] + e["dur"] <= block["ts"] + block["dur"]]

    assert len(blocks) == 2 and inside(blocks[0]) == inside(blocks[1])
    assert "4 kept as gradients but may be checkpoint inputs" in note(load("ckpt_swap", True))


def test_ddp_reduces_exactly_the_gradients_that_are_kept():
    """The all-reduce DDP ran in the profiled step holds the model's parameters' elements
    (torch's named_parameters), which is what the kept gradients add up to."""
    trace = load("ckpt_ddp", False)
    params = sum(math.prod(p["shape"]) for p in answers("ckpt_ddp")["named_parameters"])
    reduced = [c.elements for c in trace.collectives() if c.purpose.value == "gradients" and c.step == 2]
    assert reduced == [params]
    assert sum(math.prod(g.shape) for g in readiness(trace).gradients) == params


def test_inspect_says_what_it_set_aside():
    result = run("inspect", HERE / "ckpt_reentrant.json.gz", "--sizes", HERE / "ckpt_reentrant.params.json")
    assert result.exit_code == 0, result.output
    assert "2 set aside, not gradients" in result.output
    data = json.loads(run("inspect", HERE / "ckpt_reentrant.json.gz", "--sizes",
                          HERE / "ckpt_reentrant.params.json", "--json").output)
    assert data["parameters"]["count"] == 12 and len(data["gradients"]) == 12


def test_a_detach_with_bad_dims_is_one_line(tmp_path):
    doc = json.loads(gzip.open(HERE / "ckpt_reentrant.json.gz", "rt").read())
    events = doc.pop("traceEvents")
    at = next(i for i, e in enumerate(events) if e.get("name") == "aten::detach")
    events[at]["args"]["Input Dims"] = [["six", 12]]
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n],\n"
                    + json.dumps(doc)[1:] + "\n")
    assert_error(run("inspect", path), f"{path}:{at + 2}:", "Input Dims")


def test_a_plan_says_which_of_its_gradients_may_be_checkpoint_inputs():
    """Plans use the trace's gradients: where leaves that may be activations are planned, the
    plan says so (stderr), as inspect does; with the sidecar they are set aside and said so."""
    path = FIXTURES / "kineto_modules" / "ckpt_reentrant.json.gz"
    alone = run("plan-buckets", path, "--max-bytes", "1k")
    assert alone.exit_code == 0 and "2 kept as gradients but may be checkpoint inputs" in \
        " ".join(alone.stderr.split())
    sized = run("plan-buckets", path, "--max-bytes", "1k", "--sizes",
                FIXTURES / "kineto_modules" / "ckpt_reentrant.params.json")
    assert sized.exit_code == 0 and "2 set aside, not gradients" in " ".join(sized.stderr.split())
