"""``--nccl-env`` and the settings an ``--nccl-log`` run printed: NCCL as the job forces it."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, VGG, assert_error, run

GRAPH_LOG = FIXTURES / "nccl" / "nccl_tests_350_a100pcie_2x1_graph.log"
TOPO = ("--nodes", "2", "--gpus-per-node", "1", "--device", "a100", "--nic-gbps", "200",
        "--intra", "pcie", "--nccl", "2.26.2")
SIZES = ("--sizes", "8:1G")


def _rows(*args):
    result = run("collective", "allreduce", *args, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    return doc, {(r["algorithm"], r["protocol"]) for r in doc["rows"]}, result.stderr


def _log_with(tmp_path, *lines):
    """The GRAPH log with ``lines`` where NCCL prints them (rank 0, NCCL INFO)."""
    text = GRAPH_LOG.read_text().splitlines()
    settings = [f"n013:101855:101885 [0] NCCL INFO {x}" for x in lines]
    out = tmp_path / "forced.log"
    out.write_text("\n".join(text[:7] + settings + text[7:]) + "\n")
    return out


def test_nccl_env_restricts_nccl_s_choice_and_says_so():
    _, own, _ = _rows(*TOPO, *SIZES)
    assert len({p for _, p in own}) > 1  # NCCL's own picks several protocols
    doc, forced, _ = _rows(*TOPO, *SIZES, "--nccl-env", "NCCL_PROTO=Simple",
                           "--nccl-env", "NCCL_ALGO=Ring")
    assert forced == {("Ring", "Simple")}
    assert doc["topology"]["nccl_env"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    assert "restricted by NCCL_ALGO=Ring NCCL_PROTO=Simple" in doc["model"]
    plain, _, _ = _rows(*TOPO, *SIZES)
    assert plain["topology"]["nccl_env"] == {}


def test_the_settings_a_logged_run_printed_are_modelled(tmp_path):
    log = _log_with(tmp_path, "NCCL_PROTO set by environment to Simple",
                    "NCCL_MAX_NCHANNELS set by environment to 1.")
    doc, picks, err = _rows("--nccl-log", log, *TOPO, *SIZES)
    assert {p for _, p in picks} == {"Simple"}
    assert doc["topology"]["nccl_env"] == {"NCCL_MAX_NCHANNELS": "1", "NCCL_PROTO": "Simple"}
    assert "the run set NCCL_MAX_NCHANNELS=1 NCCL_PROTO=Simple" in err
    # --nccl-env wins over the log for the names it gives
    doc, picks, err = _rows("--nccl-log", log, *TOPO, *SIZES, "--nccl-env", "NCCL_PROTO=LL")
    assert {p for _, p in picks} == {"LL"} and "--nccl-env replaces" in err


def test_a_bad_setting_in_a_log_is_its_line(tmp_path):
    log = _log_with(tmp_path, "NCCL_ALGO set by environment to Rnig")
    assert_error(run("collective", "allreduce", "--nccl-log", log, *TOPO), f"{log}:8:",
                 "'Rnig' is not one of")


@pytest.mark.parametrize("value, words", [
    ("NCCL_ALGO", ("NAME=VALUE", "NCCL_PROTO")),
    ("NCCL_BUFFSIZE=1", ("NAME=VALUE", "NCCL_NVLS_ENABLE")),
    ("NCCL_ALGO=Rnig", ("--nccl-env NCCL_ALGO=Rnig", "'Rnig' is not one of")),
    ("NCCL_MAX_NCHANNELS=99", ("from 1 to 32",)),
])
def test_bad_settings_are_usage_errors(value, words):
    assert_error(run("plan-buckets", VGG, "--platform", "dgx-h100", "--nccl-env", value),
                 "tracecli plan-buckets:", *words)


def test_a_collective_nccl_cannot_run_under_the_settings_is_one_line():
    # NCCL 2.19+: NCCL_ALGO=Tree leaves all-gather nothing (v2.18 kept Ring for it)
    assert_error(run("collective", "allgather", "--platform", "dgx-h100", "--nodes", "2",
                     "--nccl", "2.21.5", "--nccl-env", "NCCL_ALGO=Tree"),
                 "tracecli", "no algorithm left for AllGather", "NCCL_ALGO=Tree")
    doc, picks, _ = _rows("--platform", "dgx-h100", "--nodes", "2", "--nccl", "2.18.5",
                          "--nccl-env", "NCCL_ALGO=Tree")
    assert {a for a, _ in picks} == {"Tree"}


def test_a_plan_is_costed_under_the_settings():
    args = ("plan-buckets", VGG, "--platform", "dgx-h100", "--nodes", "2", "--json")
    own = json.loads(run(*args).stdout)
    forced = json.loads(run(*args, "--nccl-env", "NCCL_ALGO=Ring",
                            "--nccl-env", "NCCL_PROTO=Simple").stdout)
    assert forced["cost_model"]["nccl_env"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    assert own["cost_model"]["nccl_env"] == {}
    assert forced["predicted"] != own["predicted"]
