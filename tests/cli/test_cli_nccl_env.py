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
                 "'Rnig' is not one of", "--nccl-env NCCL_ALGO=VALUE")
    # --nccl-env replaces the log's setting, bad or not
    _, picks, err = _rows("--nccl-log", log, *TOPO, *SIZES, "--nccl-env", "NCCL_ALGO=Ring")
    assert {a for a, _ in picks} == {"Ring"} and "--nccl-env replaces the run's NCCL_ALGO=Rnig" in err


def test_a_log_of_two_runs_is_its_line(tmp_path):
    log = _log_with(tmp_path, "NCCL_ALGO set by environment to Tree",
                    "NCCL_ALGO set by environment to Tree", "NCCL_ALGO set by environment to Ring")
    assert_error(run("collective", "allreduce", "--nccl-log", log, *TOPO), f"{log}:10:",
                 "NCCL_ALGO is 'Ring' here and 'Tree' at line 8", "two runs")
    long = _log_with(tmp_path, "NCCL_PROTO set by environment to " + "Simple," * 40)
    assert_error(run("collective", "allreduce", "--nccl-log", long, *TOPO), f"{long}:8:",
                 "over 200 characters")


@pytest.mark.parametrize("value, words", [
    ("NCCL_ALGO", ("NAME=VALUE", "NCCL_PROTO")),
    ("NCCL_LL_BUFFSIZE=1", ("NAME=VALUE", "NCCL_NVLS_ENABLE")),
    ("NCCL_BUFFSIZE=1", ("--nccl-env NCCL_BUFFSIZE=1", "131072, 262144", "(or -2, unset)")),
    ("NCCL_ALGO=Rnig", ("--nccl-env NCCL_ALGO=Rnig", "'Rnig' is not one of")),
    ("NCCL_MAX_NCHANNELS=lots", ("NCCL reads only a whole number",)),
])
def test_bad_settings_are_usage_errors(value, words):
    assert_error(run("plan-buckets", VGG, "--platform", "dgx-h100", "--nccl-env", value),
                 "tracecli plan-buckets:", *words)


def test_a_collective_nccl_cannot_run_under_the_settings_is_one_line():
    # NCCL 2.24+: NCCL_ALGO=Tree leaves all-gather nothing and NCCL fails it; 2.19-2.23 give
    # it Ring back (tuning.cc "at least set ring algo available"); 2.18 never disables Ring
    assert_error(run("collective", "allgather", "--platform", "dgx-h100", "--nodes", "2",
                     "--nccl", "2.26.2", "--nccl-env", "NCCL_ALGO=Tree"),
                 "tracecli", "no algorithm left for AllGather", "NCCL_ALGO=Tree")
    for version in ("2.18.5", "2.21.5"):
        doc = json.loads(run("collective", "allgather", "--platform", "dgx-h100", "--nodes", "2",
                             "--nccl", version, "--nccl-env", "NCCL_ALGO=Tree", "--json").stdout)
        assert {r["algorithm"] for r in doc["rows"]} == {"Ring"}, version


def test_a_plan_runs_where_only_a_collective_it_does_not_use_is_left_with_nothing():
    doc = json.loads(run("plan-buckets", VGG, "--platform", "dgx-h100", "--nodes", "2",
                         "--nccl", "2.26.2", "--nccl-env", "NCCL_ALGO=Tree", "--json").stdout)
    assert doc["cost_model"]["algorithm"]["allgather"] is None
    assert {b["algorithm"] for b in doc["buckets"]} == {"Tree"}


def test_a_plan_is_costed_under_the_settings():
    args = ("plan-buckets", VGG, "--platform", "dgx-h100", "--nodes", "2", "--json")
    own = json.loads(run(*args).stdout)
    forced = json.loads(run(*args, "--nccl-env", "NCCL_ALGO=Ring",
                            "--nccl-env", "NCCL_PROTO=Simple").stdout)
    assert forced["cost_model"]["nccl_env"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    assert own["cost_model"]["nccl_env"] == {}
    assert forced["predicted"] != own["predicted"]
