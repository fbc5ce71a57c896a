"""The NCCL time model (issue 23): NCCL's choice kept exactly, its time fitted on public
nccl-tests tables, its error cross-validated leave-one-cluster-out.

The figures asserted are recomputed here from the fixtures (tests/nccl_training.py), never
copied from tracecli's output: the stored constants must be what a refit gives, a held-out
table must not move when its own measurements change, and the per-table goals of
docs/nccl-time-model.md are
checked on the held-out predictions.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, assert_error, run
from nccl_training import TABLES
from tracecli.costs.nccl import fitted
from tracecli.costs.nccl.fit_time import fit, loco, resolve
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.timing import channels_used
from tracecli.model import CollectiveKind as K

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import nccl_accuracy  # noqa: E402

NCCL = FIXTURES / "nccl"
GH200 = NCCL / "cscs_gh200_2x1_all_reduce_perf.txt"


@pytest.fixture(scope="module")
def held_out():
    return nccl_accuracy.held_out()


def test_the_stored_constants_and_bands_are_a_refit_of_the_training_tables(held_out):
    pts, _ = nccl_accuracy.points()
    refit = fit(pts)
    assert set(refit) == set(fitted.FITTED)
    for key, params in refit.items():
        stored = fitted.FITTED[key]
        for a, b in zip(params.__dict__.values(), stored.__dict__.values()):
            assert a == pytest.approx(b, rel=1e-9, abs=1e-9), key
    assert nccl_accuracy.bands(held_out) == fitted.ERROR_BANDS
    assert fitted.TRAINING == tuple(t.name for t in TABLES)


def test_a_held_out_table_is_predicted_without_its_own_measurements():
    pts, _ = nccl_accuracy.points()
    name = "gcp-a3mega-2x8-h100-tcpxo"
    moved = [p._replace(measured_us=p.measured_us * 10) if p.table == name else p for p in pts]
    before, after = loco(pts)[name], loco(moved)[name]
    assert [round(pred, 9) for _, pred, _ in before] == [round(pred, 9) for _, pred, _ in after]
    # ... while every other table's prediction does see it (it is in their training set)
    other = "cscs-gh200-2x1-slingshot"
    assert [pred for _, pred, _ in loco(pts)[other]] != [pred for _, pred, _ in loco(moved)[other]]


def test_a_transport_no_table_measured_is_timed_as_its_family_then_all_networks():
    assert resolve(fitted.FITTED, "ib")[1] == "rdma"        # no InfiniBand table: RoCE's family
    assert resolve(fitted.FITTED, "efa")[1] == "plugin"     # EFA: the plugins' (TCPXO, Slingshot)
    assert resolve(fitted.FITTED, "roce")[1] == "roce"
    assert resolve(fitted.FITTED, None)[1] == "local"
    assert resolve({"network": fitted.FITTED["network"]}, "efa")[1] == "network"


def test_held_out_goals_on_the_tables_with_small_sizes(held_out):
    # the 2 x 8 H100 A3 Mega table (TCPXO): NCCL's own model was 5.8x too fast below 1 MiB and
    # 32 % off from 1 MiB; held out, the time model is within 2x and 20 %
    rows = held_out["gcp-a3mega-2x8-h100-tcpxo"]
    geo, worst = nccl_accuracy.summary([(n, m, p) for n, m, p, _ in rows])
    assert worst < 2.0 and geo < 0.20
    nccl_geo, nccl_worst = nccl_accuracy.summary(
        [(n, m, nccl) for n, m, nccl, _ in nccl_accuracy.points()[1]["gcp-a3mega-2x8-h100-tcpxo"]])
    assert nccl_worst > 5.0 and nccl_geo > 0.30
    # the 2-node GH200 Slingshot table (1-128 MiB): within 20 %
    geo, _ = nccl_accuracy.summary([(n, m, p) for n, m, p, _ in held_out["cscs-gh200-2x1-slingshot"]])
    assert geo < 0.20


def test_what_misses_the_goals_is_said_not_hidden(held_out):
    # docs/nccl-time-model.md: these held-out tables miss 20 % / 2x, and why
    misses = {}
    for name, rows in held_out.items():
        geo, worst = nccl_accuracy.summary([(n, m, p) for n, m, p, _ in rows])
        if (geo is not None and geo > 0.20) or (worst is not None and worst > 2.0):
            misses[name] = (geo, worst)
    assert set(misses) == {"rtx5090-2x1-socket", "oci-h100-2x8-roce", "oci-a100-2x8-roce",
                           "b300-1x8-nvls"}


def test_channels_follow_enqueue_cc_trimming():
    # enqueue.cc:2090-2096: drop a channel while nBytes < nc x nThreads x threshold
    assert channels_used("Ring", "Simple", 64 * 512 * 16, 16, 16) == 16
    assert channels_used("Ring", "Simple", 64 * 512 * 16 - 1, 16, 16) == 15
    assert channels_used("Ring", "LL", 8 * 16 * 512 * 4, 16, 16) == 4  # ring LL: x nRanks
    assert channels_used("Tree", "LL128", 1, 16, 16) == 1
    assert channels_used("NVLS", "Simple", 1, 16, 16) == 16


def test_the_transport_changes_the_time_not_nccl_s_choice():
    ib = NcclModel.for_platform("dgx-h100", 2, "2.30.7")
    assert ib.link_net == "ib"
    from dataclasses import replace
    efa = replace(ib, net="efa", _cache={})
    for n in (8, 1 << 16, 1 << 22, 1 << 28):
        assert ib.choice(K.ALL_REDUCE, n) == efa.choice(K.ALL_REDUCE, n)
    assert efa.time_ms(K.ALL_REDUCE, 8) > ib.time_ms(K.ALL_REDUCE, 8)  # the plugins' floor
    assert NcclModel.for_platform("aws-p5", 2, "2.30.7").link_net == "efa"
    assert NcclModel.for_platform("aws-p5", 1, "2.30.7").link_net is None  # one node: NVLink


def test_the_model_knows_its_error_and_collective_prints_it():
    m = NcclModel.for_platform("aws-p5", 2, "2.30.7")
    band = m.error(K.ALL_REDUCE, 1 << 20)
    assert band is not None and band.low < 0 < band.high
    assert "no training table measured efa: timed as plugin" in band.basis
    result = run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2", "--nccl",
                 "2.30.7", "--sizes", "8,1M,1G", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["topology"]["net"] == "efa" and doc["topology"]["time_model"]["class"] == "plugin"
    for r in doc["rows"]:
        b = m.error_charged(K.ALL_REDUCE, r["bytes"])
        assert r["error_band"] == b.to_json() and r["predicted_us"] > 0
    text = run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2", "--nccl",
               "2.30.7", "--sizes", "1M").stdout
    assert "error band" in text and band.text() in text


def test_net_flag_overrides_the_platform_and_is_checked():
    doc = json.loads(run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2",
                         "--net", "ib", "--sizes", "1M", "--json").stdout)
    assert doc["topology"]["net"] == "ib"
    result = run("collective", "allreduce", "--nodes", "2", "--nic-gbps", "400", "--net", "x")
    assert result.exit_code == 2 and "--net" in result.output


# --- collective --measured checks the file (issue 23 item 6) --------------------------------

def _strip_ranks(src: Path, dst: Path) -> Path:
    dst.write_text("".join(line for line in src.read_text().splitlines(keepends=True)
                           if "#  Rank" not in line and "Collective test starting" not in line))
    return dst


def test_measured_file_of_another_rank_count_without_rank_lines(tmp_path):
    a3 = _strip_ranks(NCCL / "gcp_a3mega_h100_2x8_all_reduce_perf.txt", tmp_path / "a3.txt")
    # its busbw/algbw is 2(n-1)/n = 1.875 (16 ranks), not the 1.75 of 8 ranks
    assert_error(run("collective", "allreduce", "--measured", a3, "--platform", "dgx-h100"),
                 str(a3), "busbw/algbw", "1.875", "1.750", "8 ranks")


def test_measured_file_of_another_collective_without_its_name(tmp_path):
    bc = _strip_ranks(NCCL / "ebpf_rtx5090_2x1_broadcast_perf.txt", tmp_path / "bc.txt")
    # a broadcast's bus factor is 1; an all-reduce on 4 ranks would be 1.5
    assert_error(run("collective", "allreduce", "--measured", bc, "--gpus", "4", "--nccl", "2.30.7"),
                 str(bc), "busbw/algbw", "1.000", "allreduce on 4 ranks")


@pytest.mark.parametrize("row, words", [
    ("     1048576        999999     float     sum      -1   339.61    3.09    3.09       0   "
     "335.85    3.12    3.12       0", ("size 1048576", "count 999999")),
    ("  10GB     2684354560     float     sum      -1   339.61    3.09    3.09       0   "
     "335.85    3.12    3.12       0", ("size", "unit")),
    ("     1048576        262144     float     sum      -1   banana    3.09    3.09       0   "
     "335.85    3.12    3.12       0", ("time", "banana")),
])
def test_garbage_rows_are_one_line(tmp_path, row, words):
    lines = GH200.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("1048576"))
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines[:at] + [row + "\n"] + lines[at + 1:]))
    assert_error(run("collective", "allreduce", "--measured", bad, "--nodes", "2", "--nic-gbps",
                     "200"), str(bad), *words)


def test_sizes_the_file_does_not_have_are_said():
    result = run("collective", "allreduce", "--measured", GH200, "--nodes", "2", "--nic-gbps",
                 "200", "--nccl", "2.30.7", "--sizes", "512k,1M,2M,256M", "--json")
    assert result.exit_code == 0, result.output
    assert "no row at 2 of the 4 sizes asked (512.0 KiB, 256.0 MiB)" in result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert [r["measured_us"] is None for r in rows] == [True, False, False, True]


def test_nccl_log_nvls_graph_line_sets_the_nvls_graph(tmp_path):
    # Graph lines as NCCL 2.30.7 prints them (search.cc:1318-1321), with the figures of
    # NVIDIA/nccl#1197 for one node of 8 H100: ring 12 x 30/30, NVLS 8 x 40/60.
    base = ("host:1:1 [0] NCCL INFO Pattern {p}, crossNic 0, nChannels {c}, bw {a}/{b}, "
            "type NVL/PIX, sameChannels 1\n")
    log = tmp_path / "nvls.log"
    log.write_text("host:1:1 [0] NCCL INFO NCCL version 2.30.7+cuda12.9\n"
                   + base.format(p=4, c=12, a="30.000000", b="30.000000")
                   + base.format(p=5, c=8, a="40.000000", b="60.000000"))
    doc = json.loads(run("collective", "allreduce", "--nccl-log", log, "--gpus", "8",
                         "--sizes", "1G", "--json").stdout)
    nv = doc["topology"]["graph"]["nvls"]
    assert (nv["n_channels"], nv["bw_intra"], nv["bw_inter"]) == (8, 40.0, 60.0)
    assert doc["rows"][0]["algorithm"] == "NVLS"
    noline = tmp_path / "ring.log"
    noline.write_text(base.format(p=4, c=12, a="30.000000", b="30.000000"))
    doc = json.loads(run("collective", "allreduce", "--nccl-log", noline, "--gpus", "8",
                         "--nccl", "2.30.7", "--sizes", "1G", "--json").stdout)
    assert doc["topology"]["graph"]["nvls"] is None and doc["rows"][0]["algorithm"] != "NVLS"


def test_geomean_helper():
    assert nccl_accuracy.summary([(1 << 20, 100.0, 110.0), (1 << 21, 100.0, 90.0)])[0] == \
        pytest.approx(math.sqrt(0.1 * 0.1))
