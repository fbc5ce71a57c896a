"""Reading FSDP runs (issue 27 item 1): tracecli's reading of every FSDP fixture trace,
side by side with torch's own record of what FSDP issued in the same run (``record.json``,
made by wrapping the functions FSDP calls: never by tracecli).

``plan-buckets TRACE --strategy observed --json`` lists, for every rank of every case, the
collectives of the traced step in issue order with the contract's fields (``collective``,
``phase``, ``unit``, ``elements``, ``dtype``): equal to torch's. FSDP1's labels name no
module: given the parameter sidecar the README's one-liner writes (here written from the
record's own ``named_parameters()`` table), its units take their modules' names; without it
they are ``root``, ``unit1``, ``unit2`` in forward order.
"""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import FIXTURES, assert_error, run

ROOT = FIXTURES / "fsdp"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "record.json").is_file())


def record(case: str) -> dict:
    return json.loads((ROOT / case / "record.json").read_text())


def torch_sequence(rec: dict, rank: str, step: int) -> list[tuple]:
    return [(e["kind"], e["phase"], e["unit"], e["elements"], e["dtype"])
            for e in rec["collectives"][rank] if e["step"] == step]


def sidecar(case: str, tmp_path) -> str:
    """The parameter sidecar of the README's one-liner, from torch's own table."""
    path = tmp_path / f"{case}.sizes.json"
    path.write_text(json.dumps([{"name": p["fqn"], "shape": p["shape"], "dtype": p["dtype"]}
                                for p in record(case)["model"]["parameters"]]))
    return str(path)


def contract(doc: dict) -> list[tuple]:
    return [(b["collective"], b["phase"], b["unit"], b["elements"], b["dtype"])
            for b in doc["buckets"]]


@pytest.mark.parametrize("case", CASES)
def test_observed_is_torchs_record_on_every_rank(case, tmp_path):
    rec = record(case)
    side = sidecar(case, tmp_path) if rec["system"] == "fsdp1" else None
    for rank, name in sorted(rec["files"].items()):
        args = ["plan-buckets", ROOT / case / name, "--strategy", "observed", "--json"]
        result = run(*args, *(["--sizes", side] if side else []))
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert contract(doc) == torch_sequence(rec, rank, 3), (case, rank)
        assert doc["fsdp"]["system"] == rec["system"]
        assert doc["fsdp"]["world_size"] == rec["world_size"]
        assert all(b["start_ms"] <= b["end_ms"] for b in doc["buckets"])


@pytest.mark.parametrize("case", [c for c in CASES if record(c)["system"] == "fsdp1"])
def test_fsdp1_units_without_a_sidecar_are_named_in_forward_order(case):
    rec = record(case)
    result = run("plan-buckets", ROOT / case / "rank0.json.gz", "--strategy", "observed", "--json")
    assert result.exit_code == 0, result.output
    names = {"root": "root", "blocks.0": "unit1", "blocks.1": "unit2"}
    want = [(k, p, names[u], n, d) for k, p, u, n, d in torch_sequence(rec, "0", 3)]
    assert contract(json.loads(result.stdout)) == want


@pytest.mark.parametrize("case", ["fsdp2_default", "hsdp_2x2", "fsdp1_orig_params"])
def test_inspect_shows_units_and_their_collectives(case):
    rec = record(case)
    result = run("inspect", ROOT / case / "rank0.json.gz", "--json")
    assert result.exit_code == 0, result.output
    fsdp = json.loads(result.stdout)["fsdp"]
    assert fsdp["system"] == rec["system"] and fsdp["step"] == 3
    assert len(fsdp["units"]) == len(rec["units"])
    for unit, theirs in zip(fsdp["units"], rec["units"]):
        if rec["system"] == "fsdp2":
            assert unit["unit"] == theirs["unit"]
            shard = [p["padded_sharded_shape"] for p in theirs["params"]]
            assert unit["shard_numels"] == [_numel(s) for s in shard]
        assert unit["parent"] == (None if theirs["is_root"] else "root")
    text = run("inspect", ROOT / case / "rank0.json.gz")
    assert "units (forward order" in text.stdout and "issued" in text.stdout


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_export_links_each_unit_to_its_collectives(tmp_path):
    out = tmp_path / "g.json"
    result = run("export", ROOT / "hsdp_2x2" / "rank0.json.gz", "--to", "json", "-o", out)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    units = {n["id"] for n in doc["nodes"] if n["type"] == "unit"}
    assert units == {"unit:root", "unit:blocks.0", "unit:blocks.1"}
    edges = [e for e in doc["links"] if e["kind"] == "unit_of"]
    rec = record("hsdp_2x2")
    assert len(edges) == len(torch_sequence(rec, "0", 3))
    kinds = {n["id"]: n["kind"] for n in doc["nodes"] if n["type"] == "collective"}
    per_unit = {}
    for e in edges:
        per_unit.setdefault(e["source"], []).append(kinds[e["target"]])
    assert sorted(per_unit["unit:blocks.0"]) == ["allgather", "allgather", "allreduce",
                                                 "reduce_scatter"]
    carried = [e for e in doc["links"] if e["kind"] == "carried_by"]
    assert len(carried) == 18  # every gradient to its unit's reduce-scatter


def _without_first(doc: dict, name: str) -> dict:
    """The trace with its first event called ``name`` in ProfilerStep#3 removed."""
    events = doc["traceEvents"]
    frame = next(e for e in events if e.get("name") == "ProfilerStep#3")
    k = next(i for i, e in enumerate(events) if e.get("name") == name
             and frame["ts"] <= e.get("ts", -1) < frame["ts"] + frame["dur"])
    return {**doc, "traceEvents": events[:k] + events[k + 1:]}


@pytest.mark.parametrize("case, name, words", [
    ("fsdp2_default", "c10d::_allgather_base_", ("FSDP::all_gather", "do not pair")),
    ("fsdp2_default", "c10d::_reduce_scatter_base_", ("post_backward_reduce", "do not pair")),
    ("fsdp1_backward_pre", "FullyShardedDataParallel._pre_forward", ("FSDP1", "do not pair")),
])
def test_labels_that_do_not_pair_with_collectives_are_one_line(tmp_path, case, name, words):
    doc = json.loads(gzip.decompress((ROOT / case / "rank0.json.gz").read_bytes()))
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(_without_first(doc, name)))
    result = run("plan-buckets", path, "--strategy", "observed")
    assert_error(result, f"{path}:", *words)
