"""The FSDP fixtures agree with themselves (issue 27).

Standard library only (no torch, no tracecli): each case's traces are the ranks its
``record.json`` names; the collectives each rank's trace shows in every profiled step (the
``c10d::*`` dispatcher ops on the main thread, sizes from their ``Input Dims``) are, in order,
the ones torch's own record says FSDP issued; the ``FSDP::*`` labels around them name the same
units; each unit's sizes add up from its parameters as torch reported them; every parameter is
in exactly one unit; and each case stays small. tracecli's own tests compare tracecli with
``record.json``.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "fsdp"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "record.json").is_file())
FSDP2 = [c for c in CASES if json.loads((ROOT / c / "record.json").read_text())["system"] == "fsdp2"]
FSDP1 = [c for c in CASES if c not in FSDP2]
DTYPES = {"float": "float32", "c10::BFloat16": "bfloat16", "c10::Half": "float16",
          "double": "float64"}
COLLECTIVE_OPS = ("c10d::_allgather_base_", "c10d::allgather_", "c10d::_reduce_scatter_base_",
                  "c10d::allreduce_")


def load(case: str):
    record = json.loads((ROOT / case / "record.json").read_text())
    docs = {int(r): json.loads(gzip.decompress((ROOT / case / name).read_bytes()))
            for r, name in record["files"].items()}
    return record, docs


def step_events(doc: dict, step: int) -> list:
    """The complete events of ``ProfilerStep#step`` on the thread that ran it, in start order."""
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    frame = next(e for e in events if e["name"] == f"ProfilerStep#{step}")
    return sorted((e for e in events if e["tid"] == frame["tid"]
                   and frame["ts"] <= e["ts"] < frame["ts"] + frame["dur"]),
                  key=lambda e: (e["ts"], -e["dur"]))


def trace_collective(e: dict) -> tuple:
    """(kind, input elements, output elements or None, dtype) of one c10d op, from its args."""
    dims, types = e["args"]["Input Dims"], e["args"]["Input type"]
    if e["name"] == "c10d::_allgather_base_":
        return "allgather", math.prod(dims[1]), math.prod(dims[0]), DTYPES[types[0]]
    if e["name"] == "c10d::allgather_":     # list form: the output list's dims are not recorded
        return "allgather", math.prod(dims[1][0]), None, None
    if e["name"] == "c10d::_reduce_scatter_base_":
        return "reducescatter", math.prod(dims[1]), math.prod(dims[0]), DTYPES[types[0]]
    return "allreduce", math.prod(dims[0][0]), math.prod(dims[0][0]), None


def test_cases_present():
    assert {"fsdp2_default", "fsdp2_no_reshard", "fsdp2_explicit_prefetch",
            "fsdp2_mixed_precision", "fsdp2_4ranks", "hsdp_2x2", "fsdp2_padding",
            "fsdp1_backward_pre", "fsdp1_orig_params"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_files_are_the_ranks_the_record_names(case):
    record, docs = load(case)
    assert sorted(docs) == list(range(record["world_size"]))
    for rank, doc in docs.items():
        info = doc["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, record["world_size"], "gloo")
        steps = sorted(int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                       if str(e.get("name", "")).startswith("ProfilerStep#"))
        assert steps == record["steps_profiled"]
    assert record["same_on_every_rank"] and record["same_in_every_profiled_step"]


@pytest.mark.parametrize("case", CASES)
def test_trace_collectives_are_the_recorded_ones(case):
    record, docs = load(case)
    for rank, doc in docs.items():
        for step in record["steps_profiled"]:
            seen = [trace_collective(e) for e in step_events(doc, step) if e["name"] in COLLECTIVE_OPS]
            mine = [e for e in record["collectives"][str(rank)] if e["step"] == step]
            assert len(seen) == len(mine), (rank, step)
            for (kind, n_in, n_out, dtype), e in zip(seen, mine):
                assert (kind, n_in) == (e["kind"], e["input_elements"]), (rank, step, e)
                assert n_out in (None, e["output_elements"])
                assert dtype in (None, e["dtype"])
                assert e["elements"] == (e["input_elements"] if kind != "allgather"
                                         else e["output_elements"])


def _label_unit(name: str, label: str) -> str:
    rest = name[len(label):].strip()
    return rest[1:-1] if rest.startswith("(") else "root"


@pytest.mark.parametrize("case", FSDP2)
def test_fsdp2_labels_name_the_recorded_units(case):
    """Every collective sits inside the ``FSDP::all_gather (unit)`` or
    ``FSDP::post_backward_reduce (unit)`` label of the unit torch recorded for it."""
    record, docs = load(case)
    for rank, doc in docs.items():
        for step in record["steps_profiled"]:
            events = step_events(doc, step)
            labels = [e for e in events if e["name"].startswith(("FSDP::all_gather",
                                                                  "FSDP::post_backward_reduce"))
                      and not e["name"].startswith("FSDP::all_gather_copy")]
            units = []
            for e in (x for x in events if x["name"] in COLLECTIVE_OPS):
                around = [lab for lab in labels if lab["ts"] <= e["ts"] < lab["ts"] + lab["dur"]]
                assert len(around) == 1, (rank, step, e["name"])
                label = "FSDP::all_gather" if "all_gather" in around[0]["name"] else "FSDP::post_backward_reduce"
                units.append(_label_unit(around[0]["name"], label))
            mine = [e["unit"] for e in record["collectives"][str(rank)] if e["step"] == step]
            assert units == mine, (rank, step)


@pytest.mark.parametrize("case", FSDP2)
def test_fsdp2_units_add_up(case):
    record, _ = load(case)
    params = {p["fqn"]: p for p in record["model"]["parameters"]}
    owned = [p["fqn"] for u in record["units"] for p in u["params"]]
    assert sorted(owned) == sorted(params)
    by_unit = {u["unit"]: u for u in record["units"]}
    for u in record["units"]:
        w = u["shard_size"]
        shard = sum(math.prod(p["padded_sharded_shape"]) for p in u["params"])
        assert u["all_gather_input_elements"] == shard and u["all_gather_elements"] == w * shard
        assert u["reduce_scatter_elements"] == sum(math.prod(p["padded_unsharded_shape"])
                                                   for p in u["params"])
        for p in u["params"]:
            assert p["shape"] == params[p["fqn"]]["shape"]
            rows = [s[0] for s in p["sharded_shape_by_rank"].values()]
            assert sum(rows[:w]) == p["shape"][0] and max(rows) == p["padded_sharded_shape"][0]
            assert p["padded_unsharded_shape"][0] == w * p["padded_sharded_shape"][0]
    for events in record["collectives"].values():
        for e in events:
            u = by_unit[e["unit"]]
            want = {"allgather": (u["all_gather_elements"], u["all_gather_dtype"]),
                    "reducescatter": (u["reduce_scatter_elements"], u["reduce_dtype"]),
                    "allreduce": (u["all_reduce_elements"], u["reduce_dtype"])}[e["kind"]]
            assert (e["elements"], e["dtype"]) == want, e


@pytest.mark.parametrize("case", FSDP1)
def test_fsdp1_flat_parameters_add_up(case):
    record, _ = load(case)
    params = {p["fqn"]: p for p in record["model"]["parameters"]}
    owned = [fqn for u in record["units"] for fqn in u["param_fqns_in_order"]]
    assert sorted(owned) == sorted(params)
    w = record["world_size"]
    by_unit = {u["unit"]: u for u in record["units"]}
    for u in record["units"]:
        layout = sum(p.get("numel", 0) + p.get("padding", 0) for p in u["flat_param_layout"])
        assert layout == u["unpadded_unsharded_elements"]
        assert u["padded_unsharded_elements"] == w * u["sharded_elements"]
        assert 0 <= u["padded_unsharded_elements"] - u["unpadded_unsharded_elements"] < w
    for events in record["collectives"].values():
        for e in events:
            assert e["elements"] == by_unit[e["unit"]]["all_gather_elements"], e


def test_padding_case_pads():
    record, _ = load("fsdp2_padding")
    padded = [p for u in record["units"] for p in u["params"]
              if p["padded_unsharded_shape"] != p["shape"]]
    empty = [p for u in record["units"] for p in u["params"]
             if 0 in (s[0] for s in p["sharded_shape_by_rank"].values())]
    assert padded and empty


@pytest.mark.parametrize("case", CASES)
def test_case_is_small(case):
    for f in (ROOT / case).iterdir():
        assert f.stat().st_size < 160_000, f
