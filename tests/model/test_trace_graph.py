"""The profiler trace as a graph (issue 17 item 12): every edge ``export`` adds is checked
against what the raw trace records, or what torch recorded in the same run, counted here
independently of tracecli."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracecli.cli import cli

ROOT = Path(__file__).resolve().parents[2]
A100 = ROOT / "sample_traces" / "resnet50_ddp_nccl_2xa100.json.gz"
KINETO = ROOT / "tests" / "fixtures" / "kineto"
EVALUATE = "autograd::engine::evaluate_function: "


def export(trace: Path, *args) -> dict:
    result = CliRunner().invoke(cli, ["export", str(trace), "--to", "json", "-o", "-", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def raw(trace: Path) -> list[dict]:
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    return doc["traceEvents"]


def edges(doc: dict, kind: str) -> list[tuple[str, str]]:
    return [(e["source"], e["target"]) for e in doc["links"] if e["kind"] == kind]


def _raw_ops(trace: Path, doc: dict) -> dict[str, dict]:
    """Each exported op's raw event: the complete event that begins at its ``line`` of the
    trace file (exported times are the device's on a GPU trace, not the event's own)."""
    text = gzip.decompress(trace.read_bytes()).decode()
    starts = [0]
    for k, ch in enumerate(text):
        if ch == "\n":
            starts.append(k + 1)
    decoder = json.JSONDecoder()
    found = {}
    for n in doc["nodes"]:
        if n["type"] != "op":
            continue
        at = text.index("{", starts[n["line"] - 1])
        event, _ = decoder.raw_decode(text, at)
        names = {n["name"], EVALUATE + n["name"], EVALUATE + "torch::autograd::" + n["name"]}
        assert event.get("ph") == "X" and (event["name"] in names or event["name"].endswith(n["name"])), n
        found[n["id"]] = event
    return found


@pytest.mark.parametrize("trace", [A100, KINETO / "mlp_default.json.gz"], ids=["a100", "torch213"])
def test_backward_of_edges_are_the_trace_s_fwdbwd_flows(trace):
    events, doc = raw(trace), export(trace)
    ops = _raw_ops(trace, doc)
    starts, finishes = defaultdict(list), defaultdict(list)  # an id recurs each step
    for e in events:
        if e.get("cat") == "fwdbwd" and e.get("ph") in ("s", "f"):
            (starts if e["ph"] == "s" else finishes)[e["id"]].append((e["ts"], e["tid"]))
    pairs = [(f, s) for i in starts.keys() & finishes.keys()
             for s, f in zip(sorted(starts[i]), sorted(finishes[i]))]

    def within(point, e) -> bool:  # a flow binds to an event inside the op, on its thread
        ts, tid = point
        return tid == e["tid"] and e["ts"] - 0.05 <= ts <= e["ts"] + e["dur"] + 0.05

    backward_of = edges(doc, "backward_of")
    assert backward_of and len(backward_of) <= len(pairs)
    for b, f in backward_of:
        bwd, fwd = ops[b], ops[f]
        assert any(within(fin, bwd) and within(st, fwd) for fin, st in pairs), (b, f)


@pytest.mark.parametrize("trace", [A100, KINETO / "mlp_default.json.gz"], ids=["a100", "torch213"])
def test_next_edges_follow_each_thread_and_stream(trace):
    doc = export(trace)
    ops = _raw_ops(trace, doc)
    lanes = defaultdict(list)
    for op_id, e in ops.items():
        lanes[e["tid"]].append((e["ts"], op_id))
    expected = {(a[1], b[1]) for lane in lanes.values() for a, b in zip(sorted(lane), sorted(lane)[1:])}
    nexts = edges(doc, "next")
    assert {(u, v) for u, v in nexts if u in ops} == expected
    nodes = {n["id"]: n for n in doc["nodes"]}
    stream = [(u, v) for u, v in nexts if nodes[u]["type"] == "collective"]
    assert stream
    for u, v in stream:  # one stream runs its kernels one after another
        assert nodes[u]["lane"] == nodes[v]["lane"]
        if nodes[u]["step"] == nodes[v]["step"]:
            assert nodes[u]["end_ms"] <= nodes[v]["start_ms"] + 1e-6


@pytest.mark.parametrize("case", ["mlp_default", "mlp_cap1", "convbn_cap", "mixed_bf16"])
def test_carried_by_groups_the_gradients_as_torch_bucketed_them(case):
    """Each collective's carried gradients add up to the bucket DDP reports for it, in
    launch order (DDP's own logging data, recorded in the same run)."""
    torch = json.loads((KINETO / f"{case}.torch.json").read_text())
    sizes = [int(s) for s in torch["ddp"]["rebuilt_bucket_sizes"].split(",")]
    doc = export(KINETO / f"{case}.json.gz", "--sizes", str(KINETO / f"{case}.sizes.json"))
    nodes = {n["id"]: n for n in doc["nodes"]}
    carried = defaultdict(list)
    for g, c in edges(doc, "carried_by"):
        carried[c].append(nodes[g]["nbytes"])
    launched = sorted(carried, key=lambda c: nodes[c]["launch_ms"])
    assert [sum(carried[c]) for c in launched] == sizes
    counts = [len(b.split()) for b in torch["ddp"]["rebuilt_per_bucket_param_indices"].split(",")]
    assert [len(carried[c]) for c in launched] == counts
