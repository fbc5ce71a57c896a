"""DDP as it runs (issue 24 item 4): ``--strategy ddp`` on the torch 2.13 runs of each DDP
mode gives the buckets torch itself reported in the same run (``NAME.torch.json``); the
trace's mode is detected; the construction-time assignment equals torch's own function; a
cap in decimal units says what DDP makes of it."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, VGG, run
from tracecli.parsers import load
from tracecli.pipeline import ComputeRequest, CostRequest, plan_trace
from tracecli.planning.strategies.ddp import ddp_buckets
from tracecli.planning.strategies.ddp_modes import Param, construction_buckets

KINETO = FIXTURES / "kineto"
MODES = ["unused_some", "unused_allused", "static_graph", "mlp_gradview", "mlp_caplist",
         "resnet18_default", "resnet18_cap25", "transformer_default",
         # one NCCL rank on an H100 (torch 2.11): the device's kernels time the trace
         "resnet18_default_cuda", "resnet18_cap25_cuda", "transformer_default_cuda"]
MiB = 1 << 20


def _answers(case: str) -> dict:
    return json.loads((KINETO / f"{case}.torch.json").read_text())


def _options(answers: dict) -> dict:
    """The run's own DDP arguments as tracecli's knobs (bucket_cap_mb_list has none: its
    first cap is the first bucket's, the largest the cap, as DDP computes them)."""
    kwargs, config = answers["ddp_kwargs"], answers["bucket_config"]
    options = {}
    if "bucket_cap_mb" in kwargs or config["per_bucket_bytes_caps"]:
        options["max_bytes"] = config["bucket_bytes_cap"]
        caps = config["per_bucket_bytes_caps"]
        options["first_bucket_bytes"] = caps[0] if caps else config["first_bucket_bytes_cap"]
    return options


@pytest.mark.parametrize("case", MODES)
def test_ddp_plans_the_buckets_torch_used(case):
    answers = _answers(case)
    if answers["bucket_config"]["per_bucket_bytes_caps"][2:]:
        pytest.skip("more than two per-bucket caps")  # none of these fixtures
    planned = plan_trace(load(str(KINETO / f"{case}.json.gz")), "ddp", _options(answers),
                         ComputeRequest(), CostRequest())
    theirs = [b["bytes"] for b in answers["buckets"]["profiled"]]
    assert [b.nbytes for b in planned.plan.buckets] == theirs, case
    names = [[planned.inp.grads[i].name for i in b.members] for b in planned.plan.buckets]
    for ours, b in zip(names, answers["buckets"]["profiled"]):
        named = [n for n in ours if not n.startswith("grad")]  # positional names: same shape
        assert set(named) <= set(b["params"])
        assert len(ours) == len([p for p in b["params"] if p not in answers["unused_in_profiled"]])


@pytest.mark.parametrize("case,find_unused,static", [
    ("unused_some", True, False), ("unused_allused", True, False), ("static_graph", False, True),
    ("mlp_gradview", False, False), ("resnet18_default", False, False),
    ("resnet18_default_cuda", False, False)])
def test_the_mode_is_read_from_the_trace(case, find_unused, static):
    answers = _answers(case)
    assert answers["ddp_kwargs"].get("find_unused_parameters", False) == find_unused
    assert answers["ddp_kwargs"].get("static_graph", False) == static
    result = run("plan-buckets", KINETO / f"{case}.json.gz", "--strategy", "ddp", "--json")
    options = json.loads(result.stdout)["options"]
    assert (options["find_unused_parameters"], options["static_graph"]) == (find_unused, static)
    said = "find_unused_parameters=True" if find_unused else "static_graph=True" if static else None
    assert (said in result.stderr) if said else "the trace shows DDP with" not in result.stderr


def test_observed_agrees_with_ddp_on_a_find_unused_run():
    """The run's own gradient all-reduces, as the profiled step recorded them, are the
    buckets --strategy ddp plans (the used map is not a gradient bucket in either)."""
    for case in ("unused_some", "unused_allused", "static_graph"):
        observed = json.loads(run("plan-buckets", KINETO / f"{case}.json.gz", "--strategy",
                                  "observed", "--json").stdout)
        ddp = json.loads(run("plan-buckets", KINETO / f"{case}.json.gz", "--strategy", "ddp",
                             "--json").stdout)
        assert [b["bytes"] for b in observed["buckets"]] == [b["bytes"] for b in ddp["buckets"]]
        assert [b["tensors"] for b in observed["buckets"]] == [b["tensors"] for b in ddp["buckets"]]
        assert "notes" not in observed  # every bucket matched (by DDP's own rule)


def test_construction_buckets_are_torch_s():
    """The construction-time assignment against torch's own function, with DDP's sort and
    reversal (torch/nn/parallel/distributed.py _ddp_init_helper)."""
    torch = pytest.importorskip("torch", reason="the side-by-side check needs torch")
    import random

    import torch.distributed as dist

    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 30)
        sizes = [rng.randint(1, 3 * MiB) // 4 for _ in range(n)]
        dtypes = [rng.choice(["float32", "float16"]) for _ in range(n)]
        limits = [rng.randint(1, 2 * MiB), rng.randint(1, 8 * MiB)]
        tensors = [torch.empty(max(s, 1), dtype=getattr(torch, d)) for s, d in zip(sizes, dtypes)]
        theirs, _ = dist._compute_bucket_assignment_by_size(tensors, limits)
        params = [Param(f"p{k}", t.numel() * t.element_size(), d, k)
                  for k, (t, d) in enumerate(zip(tensors, dtypes))]
        assert construction_buckets(params, limits, ddp_buckets) == \
            [list(b) for b in reversed(theirs)]


def test_find_unused_without_unused_parameters_is_tuned_off():
    """Every parameter had a gradient (unused_allused): the tuning also tries the rebuild that
    find_unused_parameters=False gives; with one unused (unused_some) it cannot."""
    from tracecli.pipeline import prepare
    from tracecli.pipeline.ddp_run import ddp_setup
    from tracecli.planning.strategies import options_of
    from tracecli.planning.strategies.ddp import ddp_inputs, ddp_tuning

    for case, both in (("unused_allused", True), ("unused_some", False)):
        planned = prepare(load(str(KINETO / f"{case}.json.gz")), ComputeRequest(), CostRequest())
        inp, mode = ddp_setup(planned.trace, planned.ready, planned.inp)
        assert mode.find_unused_parameters
        options = ddp_inputs(options_of("ddp", {"find_unused_parameters": True}), inp)
        modes = {o.find_unused_parameters for o in ddp_tuning(inp, options)}
        assert modes == ({True, False} if both else {True}), case


def test_a_decimal_cap_says_what_ddp_makes_of_it():
    out = " ".join(run("plan-buckets", VGG, "--strategy", "ddp", "--max-bytes", "25MB").stdout.split())
    assert "--max-bytes 25MB is 25,000,000 bytes, DDP's bucket_cap_mb=23.841858" in out
    assert "--max-bytes 25MiB is bucket_cap_mb=25" in out
    assert "DDP's MB are MiB" not in run("plan-buckets", VGG, "--strategy", "ddp", "--max-bytes",
                                         "25MiB").stdout
