"""The topology flags, ``tracecli collective`` and NCCL's model in plans, through the CLI."""

from __future__ import annotations

import gzip
import importlib.util
import json

import pytest

from conftest import FIXTURES, VGG, assert_error, run
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.nccl_tests import read_nccl_tests
from tracecli.costs.nccl.tuning import ALGOS, PROTOS
from tracecli.model import CollectiveKind as K

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="replay and calibrate need torch (the replay extra)")

NCCL = FIXTURES / "nccl"
GH200 = NCCL / "cscs_gh200_2x1_all_reduce_perf.txt"  # all_reduce_perf, 2 nodes x 1 GPU, NCCL 2.30.7
BCAST = NCCL / "ebpf_rtx5090_2x1_broadcast_perf.txt"
GRAPH_LOG = NCCL / "nccl_tests_350_a100pcie_2x1_graph.log"  # ring 1 x 24/24, tree 1 x 48/24
TUNING_LOG = NCCL / "ebpf_rtx5090_2x1_2.29.7.log"  # a TUNING table, no GRAPH line
GH200_NET = ("--nodes", "2", "--nic-gbps", "200", "--nccl", "2.30.7")
# all_reduce_perf -g 8: ONE thread driving 8 A100s (its "# nThread 1 nGpus 8" line), NCCL 2.29.3
G8 = NCCL / "modal_a100_1x8_g8_all_reduce_perf_2.29.3.txt"
G8_TOPO = ("--device", "a100", "--nccl", "2.29.3")
ROW_KEYS = {"bytes", "predicted_us", "algorithm", "protocol", "algbw_gbps", "busbw_gbps",
            "nccl_us", "error_band"}  # issue 23: NCCL's own time and the error band added


def ok(*args):
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def jdoc(*args):
    return json.loads(ok(*args, "--json").stdout)


# --- plans --------------------------------------------------------------------------------

def test_topology_flags_make_each_bucket_nccl_s_time_algorithm_and_protocol():
    doc = jdoc("plan-buckets", VGG, "--platform", "dgx-h100", "--nodes", "8", "--nccl", "2.30.7")
    cm = doc["cost_model"]
    assert cm["model"] == "nccl" and cm["nodes"] == 8 and cm["gpus_per_node"] == 8
    assert doc["gpus"] == 64 and cm["nic_gbps"] == 3200.0 and cm["name"] == "nccl:dgx-h100"
    model = NcclModel.for_platform("dgx-h100", 8, version="2.30.7")
    for b in doc["buckets"]:
        algo, proto, us = model.choice(K.ALL_REDUCE, b["bytes"])
        assert (b["algorithm"], b["protocol"]) == (algo, proto)
        assert b["algorithm"] in ALGOS and b["protocol"] in PROTOS
        # issue 23: a bucket's time is NCCL's pick timed by the fitted time model, no longer
        # NCCL's own ranking time (us)
        assert b["duration_ms"] == pytest.approx(model.predicted_us(K.ALL_REDUCE, b["bytes"]) / 1000.0)


def test_plan_text_names_the_algorithm_and_protocol_per_bucket():
    out = ok("plan-buckets", VGG, "--platform", "dgx-h100", "--nodes", "8", "--nccl", "2.30.7").stdout
    assert "NCCL algo/proto" in out and "cost model: nccl:dgx-h100: NCCL 2.30.7's own model" in out
    assert any(f"{a}/{p}" in out for a in ALGOS for p in PROTOS)


def test_the_flat_model_keeps_its_header_and_has_no_algorithm_column():
    out = ok("plan-buckets", VGG, "--network", "ib-ndr", "--gpus", "16").stdout
    assert "cost model: ib-ndr ring, alpha 5 us, bus bandwidth 45 GB/s" in out
    assert "NCCL algo/proto" not in out
    doc = jdoc("plan-buckets", VGG, "--network", "ib-ndr", "--gpus", "16")
    assert all("algorithm" not in b for b in doc["buckets"])


@needs_torch
def test_the_plan_file_carries_the_algorithm_and_replays(tmp_path):
    plan = tmp_path / "plan.json"
    ok("plan-buckets", VGG, "--gpus-per-node", "4", "--out", plan)
    doc = json.loads(plan.read_text())
    assert all({"algorithm", "protocol"} <= set(b) for b in doc["buckets"])
    dry = ok("replay", "--plan", plan, "--gpus-per-node", "4", "--dry-run")  # starts the 4 ranks
    assert "NCCL algo/proto" in dry.stdout and "4 ranks" in dry.stdout


def test_nodes_share_the_gpus_given():
    doc = jdoc("plan-buckets", VGG, "--gpus", "32", "--gpus-per-node", "8", "--nic-gbps", "1600",
               "--device", "a100", "--nccl", "2.27.3")
    cm = doc["cost_model"]
    assert (cm["nodes"], cm["gpus_per_node"], cm["device"], cm["constants"]) == (4, 8, "a100", "v2.25.1-1")


def test_intra_nics_and_b200():
    cm = jdoc("plan-buckets", VGG, "--nodes", "2", "--gpus-per-node", "4", "--nic-gbps", "400",
              "--nics", "4", "--intra", "pcie", "--device", "b200")["cost_model"]
    assert (cm["intra"], cm["nics"], cm["device"], cm["gpus"]) == ("pcie", 4, "b200", 8)
    assert cm["graph"]["ring"]["nvlink"] is False


def test_intra_nvlink_is_a_mesh_without_nvls():
    topo = jdoc("collective", "allreduce", "--gpus-per-node", "4", "--intra", "nvlink", "--nccl",
                "2.30.7", "--sizes", "1G")["topology"]
    assert (topo["intra"], topo["graph"]["nvls"], topo["graph"]["ring"]["nvlink"]) == ("nvlink", None, True)
    alps = jdoc("collective", "allreduce", "--platform", "cscs-alps-gh200", "--nodes", "2", "--nccl",
                "2.30.7", "--sizes", "1G")["topology"]
    assert (alps["gpus"], alps["device"], alps["intra"], alps["net"], alps["nic_gbps"]) == (8, "gh200", "nvlink", "ofi", 800.0)
    assert_error(run("collective", "allreduce", "--gpus-per-node", "8", "--intra", "nvlink"),
                 "tracecli collective", "4 GPUs at most")
    # NCCL's own graph from a log stands for a larger mesh
    logged = jdoc("collective", "allreduce", "--nccl-log", FIXTURES / "nccl" / "nccl_tests_350_a100pcie_2x1_graph.log",
                  "--intra", "nvlink", "--nodes", "1", "--gpus-per-node", "8", "--device", "a100",
                  "--sizes", "1M")["topology"]
    assert (logged["intra"], logged["graph"]["nvls"]) == ("nvlink", None)
    assert logged["graph"]["source"].startswith("NCCL's own graph")


# --- --nccl-tests as a cost source ---------------------------------------------------------

def _one_gradient(dump, tmp_path, nbytes: int):
    x, w, y, loss = dump.tensor(64, "0"), dump.tensor(nbytes, "/l/W"), dump.tensor(64), dump.tensor(4)
    dump.forward("LinearFunction", [x, w], [y], 0)
    dump.forward("Sum", [y], [loss], 1)
    return dump.write(tmp_path / "one.txt")


@pytest.mark.parametrize("nbytes", [1 << 20, 16 << 20, 128 << 20])
def test_nccl_tests_answers_its_measured_sizes_with_their_measurement(dump, tmp_path, nbytes):
    trace = _one_gradient(dump, tmp_path, nbytes)
    doc = jdoc("plan-buckets", trace, "--backward-ms", "5", "--nccl-tests", GH200, *GH200_NET)
    (b,) = doc["buckets"]
    measured = read_nccl_tests(str(GH200)).time_us(nbytes)
    assert b["cost_basis"] == "measured" and b["duration_ms"] == pytest.approx(measured / 1000.0)
    assert doc["cost_model"]["uses_measurements"] is True and doc["gpus"] == 2


def test_nccl_tests_between_and_beyond_its_sizes_follows_the_model(dump, tmp_path):
    doc = jdoc("plan-buckets", _one_gradient(dump, tmp_path, 3 << 20), "--backward-ms", "5",
               "--nccl-tests", GH200, *GH200_NET)
    b = doc["buckets"][0]
    run_ = read_nccl_tests(str(GH200))
    lo, hi = run_.time_us(2 << 20) / 1000.0, run_.time_us(4 << 20) / 1000.0
    assert b["cost_basis"] == "interpolated" and lo < b["duration_ms"] < hi
    beyond = jdoc("plan-buckets", _one_gradient(dump, tmp_path, 1 << 30), "--backward-ms", "5",
                  "--nccl-tests", GH200, *GH200_NET)["buckets"][0]
    assert beyond["cost_basis"] == "extrapolated" and beyond["duration_ms"] > run_.time_us(128 << 20) / 1000.0


def test_nccl_tests_of_other_ranks_leaves_the_model_alone(dump, tmp_path):
    result = run("plan-buckets", _one_gradient(dump, tmp_path, 1 << 20), "--backward-ms", "5",
                 "--nccl-tests", GH200, "--platform", "dgx-h100", "--nccl", "2.30.7", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["buckets"][0]["cost_basis"] == "model"
    assert "measured on 2 ranks; predicting 8" in result.stderr


# --- collective -----------------------------------------------------------------------------

def test_collective_json_shape_and_defaults():
    doc = jdoc("collective", "allreduce", "--platform", "dgx-h100", "--nodes", "2", "--nccl", "2.30.7")
    assert set(doc) >= {"topology", "rows"} and doc["collective"] == "allreduce"
    t = doc["topology"]
    assert (t["nodes"], t["gpus_per_node"], t["gpus"], t["device"], t["nccl_version"]) == \
        (2, 8, 16, "h100", "2.30.7")
    assert [r["bytes"] for r in doc["rows"]] == [8 << k for k in range(32)]  # 8 B .. 16 GiB
    model = NcclModel.for_platform("dgx-h100", 2, version="2.30.7")
    for r in doc["rows"]:
        assert set(r) == ROW_KEYS
        assert r["predicted_us"] == pytest.approx(model.timed_us(K.ALL_REDUCE, r["bytes"]))
        assert r["nccl_us"] == pytest.approx(model.choice(K.ALL_REDUCE, r["bytes"])[2])
        band = model.error_charged(K.ALL_REDUCE, r["bytes"])
        assert r["error_band"]["low_pct"] == pytest.approx(100 * band.low)
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / r["predicted_us"] / 1000.0)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * 15 / 16)


def test_collective_sizes_list_and_range():
    rows = jdoc("collective", "allgather", "--nodes", "1", "--gpus-per-node", "8",
                "--sizes", "1M,25MiB,1k")["rows"]
    assert [r["bytes"] for r in rows] == [1024, 1 << 20, 25 << 20]
    assert rows[0]["busbw_gbps"] == pytest.approx(rows[0]["algbw_gbps"] * 7 / 8)
    rows = jdoc("collective", "broadcast", "--gpus", "4", "--nccl", "2.30.7", "--sizes", "1k:8k")["rows"]
    assert [r["bytes"] for r in rows] == [1024, 2048, 4096, 8192]


def test_collective_measured_adds_measured_time_and_error():
    doc = jdoc("collective", "allreduce", "--measured", GH200, *GH200_NET)
    run_ = read_nccl_tests(str(GH200))
    assert doc["topology"]["gpus"] == 2 and doc["measured_file"] == str(GH200)
    assert [r["bytes"] for r in doc["rows"]] == [r.bytes for r in run_.rows]
    for r, m in zip(doc["rows"], run_.rows):
        assert set(r) == ROW_KEYS | {"measured_us", "error_pct"} and r["measured_us"] == m.time_us
        assert r["error_pct"] == pytest.approx(100 * (r["predicted_us"] - m.time_us) / m.time_us)
    text = ok("collective", "allreduce", "--measured", GH200, *GH200_NET).stdout
    assert "predicted us" in text and "measured us" in text and "predicted:" in text


def test_collective_measured_by_one_thread_driving_8_gpus_adds_its_launches():
    # nccl-tests -g 8 launches the 8 kernels one after another (src/common.cu:548-619): the
    # predictions compared with it add the fitted launch term, said on stderr and in the JSON;
    # a run of one process per GPU (GH200 above) adds nothing
    from tracecli.costs.nccl.timing import launch_us

    assert read_nccl_tests(str(G8)).gpus_per_thread == 8
    assert read_nccl_tests(str(GH200)).gpus_per_thread == 1
    result = run("collective", "allreduce", "--measured", G8, *G8_TOPO, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["measured_gpus_per_thread"] == 8 and doc["topology"]["gpus"] == 8
    model = NcclModel.for_topology("a100", 1, 8, True, 0.0, 0, "2.29.3")
    params, _ = model.time_params()
    extra = launch_us(params, 8)
    assert 7.0 < extra < 50.0  # 7 launches, each on the scale of one kernel launch
    for r in doc["rows"]:
        assert r["predicted_us"] == pytest.approx(model.timed_us(K.ALL_REDUCE, r["bytes"]) + extra)
    assert "one thread driving 8 GPUs" in result.stderr and f"{extra:.1f} us" in result.stderr
    assert jdoc("collective", "allreduce", "--measured", GH200, *GH200_NET)[
        "measured_gpus_per_thread"] == 1
    assert jdoc("collective", "allreduce", "--gpus", "8")["measured_gpus_per_thread"] is None


def test_plans_use_a_g8_run_as_measured_and_say_it_launched_serially(dump, tmp_path):
    trace = _one_gradient(dump, tmp_path, 1 << 20)
    result = run("plan-buckets", trace, "--backward-ms", "5", "--nccl-tests", G8, *G8_TOPO,
                 "--gpus", "8")
    assert result.exit_code == 0, result.output
    assert "one thread driving 8 GPUs" in result.stderr and "used as measured" in result.stderr


@pytest.mark.parametrize("value", ["0", "2.5", "x", "5000"])
def test_a_bad_ngpus_line_is_one_line(tmp_path, value):
    bad = tmp_path / "bad.txt"
    bad.write_text(G8.read_text().replace("nGpus 8 ", f"nGpus {value} "))
    assert_error(run("collective", "allreduce", "--measured", bad, *G8_TOPO), f"{bad}:3:", "nGpus")


def test_collective_nccl_log_takes_nccl_s_own_graph():
    result = run("collective", "allreduce", "--nccl-log", GRAPH_LOG, "--nodes", "2",
                 "--gpus-per-node", "1", "--device", "a100", "--nic-gbps", "200", "--intra", "pcie",
                 "--sizes", "1G", "--json")
    assert result.exit_code == 0, result.output
    graph = json.loads(result.stdout)["topology"]["graph"]
    assert (graph["ring"]["n_channels"], graph["ring"]["bw_intra"], graph["tree"]["bw_intra"]) == \
        (1, 24.0, 48.0)
    assert "own graph" in graph["source"]
    assert "NCCL 2.16.5 is not modelled" in result.stderr  # the log's version, said


# --- errors: one line, exit 2 ---------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (("--gpus", "10", "--gpus-per-node", "8"), ("--gpus 10", "--gpus-per-node 8")),
    (("--gpus", "24", "--nodes", "2", "--gpus-per-node", "8"), ("--gpus 24", "= 16")),
    (("--nodes", "2", "--gpus-per-node", "8"), ("need a network", "--nic-gbps")),
    (("--nodes", "2", "--nic-gbps", "400", "--nics", "0"), ("--nics 0",)),
    (("--nodes", "2", "--nic-gbps", "0"), ("--nic-gbps 0",)),
    (("--nodes", "2", "--network", "ib-ndr"), ("--network", "--nodes", "one or the other")),
    (("--platform", "dgx-h100", "--alpha-us", "3"), ("--alpha-us",)),
    (("--nccl", "2.17.1"), ("not modelled", "no NVLSTree", "2.18 to 2.30")),  # 2.18+ modelled (issue 23)
    (("--nodes", "2", "--nic-gbps", "100", "--device", "cpu"), ("needs a GPU",)),
    (("--platform", "dgx-a100", "--device", "h100"), ("dgx-a100", "a100")),
])
def test_impossible_topologies_are_usage_errors(args, words):
    assert_error(run("plan-buckets", VGG, *args), "tracecli plan-buckets:", *words)


def test_collective_errors():
    assert_error(run("collective", "allreduc"), "tracecli collective:", "allreduce", "broadcast")
    assert_error(run("collective", "allreduce", "--gpus", "10", "--gpus-per-node", "8"),
                 "tracecli collective:", "--gpus 10")
    assert_error(run("collective", "allreduce", "--measured", BCAST), str(BCAST),
                 "broadcast_perf", "all_reduce_perf")
    assert_error(run("collective", "allreduce", "--measured", GH200, "--platform", "dgx-h100"),
                 str(GH200), "2 ranks", "8")
    assert_error(run("collective", "allreduce", "--sizes", "1k:1"), "tracecli collective:", "below")
    assert_error(run("collective", "allreduce", "--nccl-log", TUNING_LOG), str(TUNING_LOG),
                 "no ring graph line")


def test_a_truncated_nccl_tests_file_is_one_line(tmp_path, dump):
    cut = tmp_path / "cut.txt"
    cut.write_text("".join(GH200.read_text().splitlines(keepends=True)[:15]))
    assert_error(run("collective", "allreduce", "--measured", cut), str(cut), "truncated")
    trace = _one_gradient(dump, tmp_path, 1 << 20)
    assert_error(run("plan-buckets", trace, "--backward-ms", "5", "--nccl-tests", cut), str(cut),
                 "truncated")


def test_calibration_and_nccl_tests_are_one_source_or_the_other(tmp_path):
    assert_error(run("plan-buckets", VGG, "--nccl-tests", GH200, "--calibration", "x.json"),
                 "tracecli plan-buckets:", "--calibration")


# --- calibrate, and the NCCL version by default ----------------------------------------------

@needs_torch
def test_calibrate_shows_nccl_s_model_beside_each_measured_size():
    doc = jdoc("calibrate", "--gpus-per-node", "2", "--points", "5", "--max-size", "4MiB",
               "--iters", "3", "--warmup", "1", "--nccl", "2.30.7")  # as test_replay's calibrate
    nccl = doc["nccl_model"]
    model = NcclModel.for_topology("h100", 1, 2, True, 0, 0, "2.30.7")
    assert doc["gpus"] == 2 and nccl["topology"]["gpus"] == 2  # the topology's ranks were started
    assert [p["bytes"] for p in nccl["points"]] == [p["bytes"] for p in doc["points"]]
    for p in nccl["points"]:
        algo, proto, us = model.choice(K.ALL_REDUCE, p["bytes"])
        assert (p["algorithm"], p["protocol"]) == (algo, proto)
        # issue 23: predicted_ms is NCCL's pick timed by the time model, not NCCL's own us
        assert p["predicted_ms"] == pytest.approx(model.predicted_us(K.ALL_REDUCE, p["bytes"]) / 1000.0)


def test_calibrate_refuses_an_impossible_topology_before_starting_ranks():
    assert_error(run("calibrate", "--gpus", "3", "--gpus-per-node", "2"), "tracecli calibrate:",
                 "--gpus 3", "--gpus-per-node 2")


def test_the_nccl_version_by_default(monkeypatch):
    from tracecli.costs.nccl import request
    from tracecli.costs.nccl.versions import DEFAULT_VERSION

    monkeypatch.setattr(request, "installed_nccl", lambda: "2.27.3")
    assert request.nccl_version(None) == ("2.27.3", [])
    assert request.nccl_version("2.29.7") == ("2.29.7", [])  # --nccl wins
    monkeypatch.setattr(request, "installed_nccl", lambda: "2.17.1")  # not modelled (2.18+ is since issue 23)
    version, said = request.nccl_version(None)
    assert version == DEFAULT_VERSION and "2.17.1 is not modelled" in said[0]
    monkeypatch.setattr(request, "installed_nccl", lambda: None)
    assert request.nccl_version(None) == (DEFAULT_VERSION, [])


def test_the_installed_torch_s_nccl_is_read_as_torch_reports_it():
    from types import SimpleNamespace

    from tracecli.costs.nccl.installed import _NO_CUDA, _asked

    def torch_with(v):
        return SimpleNamespace(cuda=SimpleNamespace(nccl=SimpleNamespace(version=lambda: v)))

    assert _asked(torch_with((2, 27, 3))) == "2.27.3"
    assert _asked(torch_with(22105)) == "2.21.5" and _asked(torch_with(2708)) == "2.7.8"

    def raising():
        raise AttributeError("module 'torch._C' has no attribute '_nccl_version'")  # a CPU build

    assert _asked(SimpleNamespace(cuda=SimpleNamespace(nccl=SimpleNamespace(version=raising)))) is None
    assert _NO_CUDA.search("cuda: Optional[str] = None\n") and not _NO_CUDA.search("cuda = '12.8'\n")


@pytest.mark.parametrize("option, what", [("--measured", "nccl-tests table"),
                                          ("--nccl-log", "NCCL debug log")])
def test_endless_or_huge_files_are_refused_without_reading_them_whole(tmp_path, monkeypatch,
                                                                      option, what):
    """/dev/zero stops at its first chunk; a text past the limit at the limit (both were
    read whole before)."""
    assert_error(run("collective", "allreduce", option, "/dev/zero"), "/dev/zero:1:",
                 f"binary data, not a {what}")
    monkeypatch.setattr("tracecli.costs.nccl.nccl_tests.MAX_FILE_BYTES", 4096)
    monkeypatch.setattr("tracecli.costs.nccl.nccllog.MAX_LOG_BYTES", 4096)
    big = tmp_path / "big.txt"
    big.write_text("# nThread 1 nGpus 1\n" * 1000)
    assert_error(run("collective", "allreduce", option, big), str(big), "larger than the 4.0 KiB")


def test_a_gzipped_nccl_tests_table_reads_as_the_table(tmp_path):
    packed = tmp_path / "table.txt.gz"
    packed.write_bytes(gzip.compress(GH200.read_bytes()))
    plain = run("collective", "allreduce", "--measured", GH200, "--json")
    assert plain.exit_code == 0, plain.output
    assert json.loads(run("collective", "allreduce", "--measured", packed, "--json").stdout)["rows"] \
        == json.loads(plain.stdout)["rows"]
