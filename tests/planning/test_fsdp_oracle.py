"""FSDP's units of any module tree, against torch's own (issue 27): hypothesis draws module
trees (parameters of 1-3 dims, dim 0 from 0 to 40, 0-3 children, each wrapped or not),
world sizes and knobs (FSDP2 ``param_dtype``, FSDP1 ``use_orig_params``), and
:mod:`tracecli.planning.fsdp.layout` must give exactly the units torch 2.13 makes of the
same tree: ``fully_shard`` on meta tensors over a fake process group, and
``FullyShardedDataParallel`` with an auto-wrap policy (``tests/fixtures/fsdp/fsdp_oracle.py``,
which reads FSDP's own objects). A tree torch refuses, tracecli refuses too.
"""

from __future__ import annotations

import inspect
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES

from tracecli.errors import PlanError
from tracecli.planning.fsdp.layout import fsdp1_layout, fsdp2_layout

torch = pytest.importorskip("torch")


def _groups_per_state() -> bool:
    """Whether this torch's FSDPState keeps ``_fsdp_param_groups`` (2.13's), which the oracle
    reads; False where FSDP2 or its source cannot be read."""
    try:
        from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState
        return "_fsdp_param_groups" in inspect.getsource(FSDPState.__init__)
    except (ImportError, OSError, TypeError):
        return False


if not _groups_per_state():  # torch 2.11 and before
    pytest.skip("the oracle reads FSDP2's internals as torch 2.13 keeps them (a module's "
                "FSDPState._fsdp_param_groups); this torch keeps one group per module",
                allow_module_level=True)
sys.path.insert(0, str(FIXTURES / "fsdp"))
from fsdp_oracle import TorchRefused, fsdp1_layout as torch_fsdp1, fsdp2_layout as torch_fsdp2  # noqa: E402


def _shape(draw) -> list[int]:
    ndim = draw(st.integers(1, 3))
    first = draw(st.one_of(st.integers(1, 3), st.integers(0, 40)))
    return [first] + [draw(st.integers(1, 9)) for _ in range(ndim - 1)]


@st.composite
def trees(draw, depth: int = 0) -> dict:
    params = {f"p{i}": _shape(draw) for i in range(draw(st.integers(0 if depth else 1, 3)))}
    children = {}
    if depth < 3:
        for j in range(draw(st.integers(0, 3 if depth < 2 else 2))):
            child = draw(trees(depth + 1))
            child["wrap"] = draw(st.booleans())
            children[f"c{j}"] = child
    return {"params": params, "children": children}


FSDP2_FIELDS = ("unit", "param_fqns_in_order", "all_gather_input_elements",
                "all_gather_elements", "all_gather_dtype", "reduce_scatter_elements")
PARAM_FIELDS = ("fqn", "shape", "padded_sharded_shape", "padded_unsharded_shape",
                "sharded_shape_by_rank")
FSDP1_FIELDS = ("unit", "param_fqns_in_order", "flat_param_layout", "aligned_numel",
                "unpadded_unsharded_elements", "sharded_elements", "padded_unsharded_elements",
                "all_gather_elements", "reduce_scatter_elements")


def _fsdp2_view(units: list[dict]) -> list[dict]:
    return [{**{k: u[k] for k in FSDP2_FIELDS},
             "params": [{k: p[k] for k in PARAM_FIELDS} for p in u["params"]]} for u in units]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(), world=st.sampled_from([2, 3, 4, 8]),
       param_dtype=st.sampled_from([None, "bfloat16"]))
def test_fsdp2_units_are_torchs(tree, world, param_dtype):
    try:
        theirs = torch_fsdp2(tree, world, param_dtype=param_dtype)
    except TorchRefused:
        with pytest.raises(PlanError):
            fsdp2_layout(tree, world, param_dtype)
        return
    assert _fsdp2_view(fsdp2_layout(tree, world, param_dtype)) == _fsdp2_view(theirs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(), world=st.sampled_from([2, 3, 4, 8]), orig=st.booleans())
def test_fsdp1_flat_parameters_are_torchs(tree, world, orig):
    try:
        theirs = torch_fsdp1(tree, world, use_orig_params=orig)
    except TorchRefused:
        with pytest.raises(PlanError):
            fsdp1_layout(tree, world, orig)
        return
    ours = fsdp1_layout(tree, world, orig)
    assert [{k: u[k] for k in FSDP1_FIELDS} for u in ours] == \
        [{k: u[k] for k in FSDP1_FIELDS} for u in theirs]


def test_the_fixture_model_matches_its_record():
    """The fixtures' own model tree gives the units their record.json holds."""
    import json

    for case in ("fsdp2_padding", "fsdp1_orig_params", "fsdp2_4ranks"):
        rec = json.loads((FIXTURES / "fsdp" / case / "record.json").read_text())
        modules = {m["fqn"]: m for m in rec["model"]["modules"]}
        shapes = {p["fqn"]: p["shape"] for p in rec["model"]["parameters"]}
        wrapped = {u["module_fqn"] for u in rec["units"]}

        def tree(fqn: str) -> dict:
            m = modules[fqn]
            return {"params": {n: shapes[f"{fqn}.{n}" if fqn else n] for n in m["params"]},
                    "children": {c.rsplit(".", 1)[-1]: tree(c) for c in m["children"]},
                    "wrap": fqn in wrapped}

        world = rec["units"][0].get("shard_size") or rec["world_size"]
        if rec["system"] == "fsdp2":
            ours = fsdp2_layout(tree(""), world)
            assert [u["all_gather_elements"] for u in ours] == \
                [u["all_gather_elements"] for u in rec["units"]]
            assert [u["param_fqns_in_order"] for u in ours] == \
                [u["param_fqns_in_order"] for u in rec["units"]]
        else:
            ours = fsdp1_layout(tree(""), world, rec["units"][0]["use_orig_params"])
            assert [u["flat_param_layout"] for u in ours] == \
                [u["flat_param_layout"] for u in rec["units"]]
