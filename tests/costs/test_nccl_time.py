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
from nccl_training import FIXTURES as TRAINING, TABLES, table_rows
from tracecli.costs.nccl import fitted
from tracecli.costs.nccl.fit_time import fit, loco, resolve
from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.pipeline import (chunk_bytes, fill_bytes, fill_scale, loop_bytes,
                                          nvls_channels)
from tracecli.costs.nccl.timing import channels_used, features, time_us
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
    assert nccl_accuracy.scale() == fitted.SCALE


def test_a_held_out_table_is_predicted_without_its_own_measurements():
    pts, _ = nccl_accuracy.points()
    name = "nebius-h100-2x8-ib"
    moved = [p._replace(measured_us=p.measured_us * 10) if p.table == name else p for p in pts]
    before, after = loco(pts)[name], loco(moved)[name]
    assert [round(pred, 9) for _, pred, _ in before] == [round(pred, 9) for _, pred, _ in after]
    # ... nor with its cluster's other table (the same Nebius H100 cluster type) ...
    sibling = "nebius-h100-2x8-ib-large"
    assert [round(pred, 9) for _, pred, _ in loco(pts)[sibling]] == \
        [round(pred, 9) for _, pred, _ in loco(moved)[sibling]]
    # ... while every other cluster's prediction does see it (it is in their training set)
    other = "oci-h100-2x8-roce"
    assert [pred for _, pred, _ in loco(pts)[other]] != [pred for _, pred, _ in loco(moved)[other]]


def test_clusters_are_held_out_whole():
    groups = {}
    for t in TABLES:
        groups.setdefault(t.group, []).append(t.name)
    assert groups["gcp-a3mega"] == ["gcp-a3mega-2x8-h100-tcpxo", "gcp-a3mega-2x8-h100-tcpxo-ag"]
    assert groups["nebius-h100"] == ["nebius-h100-2x8-ib", "nebius-h100-2x8-ib-large"]
    assert groups["aws-p5"] == ["aws-p5-2x8-h100-efa", "aws-p5-2x8-h100-efa-small"]
    # the two CSCS Alps GH200 tables (2 x 1 and 2 x 4 GH200 on Slingshot), round 9
    assert groups["cscs-alps"] == ["cscs-gh200-2x1-slingshot", "cscs-gh200-2x4-slingshot"]
    assert all(len(v) == 1 for k, v in groups.items()
               if k not in ("gcp-a3mega", "nebius-h100", "aws-p5", "cscs-alps"))


def test_every_training_row_agrees_with_its_own_algbw_and_busbw(tmp_path):
    # table_rows checks algbw = size/time and busbw = algbw x the bus factor of the table's
    # collective on its rank count: a copying error or a table of another rank count fails
    for t in TABLES:
        assert len(t.points()) >= 1
    a4 = TRAINING / "dstack_gcp_a4_b200_2x8_roce_all_reduce_perf.txt"
    bad = tmp_path / "a4.txt"
    bad.write_text(a4.read_text().replace("156.9   53.47", "165.9   53.47"))
    with pytest.raises(ValueError, match="algbw 53.47 is not size/time"):
        table_rows(bad, K.ALL_REDUCE, 16)
    with pytest.raises(ValueError, match="busbw/algbw 1.875 is not 1.750"):
        table_rows(a4, K.ALL_REDUCE, 8)


def test_a_transport_no_table_measured_is_timed_as_its_family_then_all_networks():
    # every transport class has a table now (EFA's by aws-ofi-nccl's protocol)
    for net in ("ib", "roce", "efa-sendrecv", "efa-rdma", "ofi", "tcpx", "tcpxo", "socket"):
        assert resolve(fitted.FITTED, net)[1] == net
    assert resolve(fitted.FITTED, None)[1] == "local"
    no_ib = {k: v for k, v in fitted.FITTED.items() if k != "ib"}
    assert resolve(no_ib, "ib")[1] == "verbs"             # RoCE's family
    no_efa = {k: v for k, v in fitted.FITTED.items() if k != "efa-rdma"}
    assert resolve(no_efa, "efa-rdma")[1] == "libfabric"  # SENDRECV's and Slingshot's
    no_tcpx = {k: v for k, v in fitted.FITTED.items() if k != "tcpx"}
    assert resolve(no_tcpx, "tcpx")[1] == "network"       # alone in its family
    assert resolve({"network": fitted.FITTED["network"]}, "efa-rdma")[1] == "network"


def _summary(rows):
    return nccl_accuracy.summary([(n, m, p) for n, m, p, _ in rows])


def test_held_out_goals_on_the_tables_with_small_sizes(held_out):
    # 2 x 8 H100 on 8 x 400G InfiniBand (Nebius), held out with its cluster's other table:
    # within 20 % from 1 MiB and 2x below
    geo, worst = _summary(held_out["nebius-h100-2x8-ib"])
    assert geo < 0.20 and worst < 2.0
    # AWS 2 x p4d (A100, EFA): within 20 % above 1 MiB; below, see the next test (round 9: its
    # SENDRECV class is one cluster, and held out it takes the libfabric family's floor)
    geo, worst = _summary(held_out["aws-p4d-2x8-a100-efa"])
    assert geo < 0.20
    pts, before = nccl_accuracy.points()
    assert _summary(before["aws-p4d-2x8-a100-efa"])[1] < 2.0  # its pick's own latency, 175 us
    # the OCI RoCE tables, NCCL's NICs merged: within 10 %
    for name in ("oci-h100-2x8-roce", "oci-a100-2x8-roce"):
        assert _summary(held_out[name])[0] < 0.10, name
    # GCP A4 (2 x 8 B200, RoCE), timed as the NCCL 2.26.2 its image builds: within 10 %
    assert _summary(held_out["gcp-a4-2x8-b200-roce"])[0] < 0.10
    # Crusoe 2 x 8 A100 on 8 x 200G InfiniBand, the only A100 InfiniBand table: predicted from
    # H100/B200 NVLSTree tables and A100 RoCE/EFA ones, within 10 % from 1 MiB; below, within
    # 2x but for the one row its run contradicts (256 KiB, 193 us out of place, 100 in place:
    # 2.45x from 193 since the 4 x 8 Voltage Park table joined; 1.96x before): the NVLS
    # latency factor apart from the ring/tree one (one factor for both made it 24 % and 1.8x)
    geo, worst = _summary(held_out["crusoe-a100-2x8-ib"])
    assert geo < 0.10
    bad = next(t for t in TABLES if t.name == "crusoe-a100-2x8-ib").contradicted()
    assert set(bad) == {262144}
    assert nccl_accuracy.summary([(n, m, p) for n, m, p, _ in held_out["crusoe-a100-2x8-ib"]
                                  if n not in bad])[1] < 1.6
    # the two EFA tables (AWS p4d, A100; p5, H100, 32 MiB-8 GiB) held out from each other, and
    # the one table of more than 3 nodes (Voltage Park, 4 x 8 H100 on 8 x 400G InfiniBand)
    # held out from the 2-node ones: within 20 % and 2x
    for name in ("aws-p5-2x8-h100-efa", "voltagepark-h100-4x8-ib"):
        geo, worst = _summary(held_out[name])
        assert geo < 0.20 and (worst is None or worst < 2.0), name
    # GCP A3 Ultra (2 x 8 H200, RoCE through Google's gIB), all-gather from 1 KiB: RoCE's
    # floor is the verbs family's (the other RoCE tables start at 8 MiB), within 20 % and 2x
    # (10.3 %: 5-7 % before the TCPX all-reduce tables moved the network-wide constants)
    geo, worst = _summary(held_out["gcp-a3ultra-2x8-h200-roce-ag"])
    assert geo < 0.20 and worst < 2.0


def test_what_misses_the_goals_is_said_not_hidden(held_out):
    # docs/nccl-time-model.md: these held-out tables miss 20 % / 2x, and why
    misses = {}
    for name, rows in held_out.items():
        geo, worst = _summary(rows)
        if (geo is not None and geo > 0.20) or (worst is not None and worst > 2.0):
            misses[name] = (geo, worst)
    # the libfabric tables with small sizes: p4d (aws-ofi-nccl's SENDRECV protocol, 177-181 us
    # at 8 B-1 KiB) is a class of one cluster, held out with the family's constants, which p5
    # (RDMA, 63-86 us) and Slingshot set: 3.9x fast at 8 B-1 KiB, within 20 % from 1 MiB
    assert held_out["aws-p4d-2x8-a100-efa"][0][3] == "libfabric"
    assert _summary(held_out["aws-p4d-2x8-a100-efa"])[0] < 0.20
    assert held_out["aws-p4d-2x8-a100-efa"][0][2] < held_out["aws-p4d-2x8-a100-efa"][0][1] / 2
    # round 10: Slingshot is three clusters (CSCS Alps 2 x 1 and 2 x 4 GH200, Sigma2 Olivia 2 x 4
    # GH200, ALCF Polaris 2 x 4 A100), each held out against the ofi constants of the other two:
    # their floors agree (17.5-22.8 us at 8-32 B) and the held-out ones land within 2.2x slow
    # there (6.5x against the EFA-set family floor in round 9); their mid sizes do not (a step
    # of each site's own: Alps 512 KiB, Olivia 256 KiB, Polaris 128 KiB slower than the size
    # above; 1-8 MiB apart with each site's libfabric rendezvous settings), and all four miss
    slingshot = ("cscs-gh200-2x1-slingshot", "cscs-gh200-2x4-slingshot",
                 "olivia-gh200-2x4-slingshot", "polaris-a100-2x4-slingshot")
    assert set(misses) == {"rtx5090-2x1-socket", "dgx-h100-1x8-nvls",
                           "gcp-a3mega-2x8-h100-tcpxo", "lambda-b200-2x8-ib",
                           "skypilot-a3high-2x8-h100-tcpx", "crusoe-a100-2x8-ib",
                           "aws-p4d-2x8-a100-efa", *slingshot}
    for name in slingshot:
        assert {used for *_, used in held_out[name]} == {"ofi"}, name
        assert _summary(held_out[name])[0] < 0.30, name  # within 30 % from 1 MiB
        for n, meas, pred, _ in held_out[name]:
            if 8 <= n <= 32:
                assert 1.0 < pred / meas < 2.2, (name, n)
    # the three GCP A3 High TCPX tables, timed per channel that runs (transports.channel_scale):
    # Google's (12 channels forced, busbw 89.5 GB/s) and dstack's all-gather (8, 50 GB/s) meet
    # 20 %; SkyPilot's (8, 66-68 GB/s: 8 MiB buffers, dstack's 4 MiB and no core bindings)
    # is predicted from the other two, dstack's 8 channels its only 8-channel evidence
    for name in ("google-a3high-2x8-h100-tcpx", "gcp-a3high-2x8-h100-tcpx-ag"):
        assert _summary(held_out[name])[0] < 0.20, name
    assert _summary(held_out["skypilot-a3high-2x8-h100-tcpx"])[0] < 0.30
    # the two tables run by one thread driving 8 GPUs (nccl-tests -g 8) teach each other the
    # launch term: held out, both meet both goals (the Modal A100 since the fitted share of
    # the channel reduction: its ring LL sizes were timed up to 27 % fast, LL128/Simple 36 %)
    for name in ("b300-1x8-nvls", "modal-a100-1x8-g8"):
        geo, worst = _summary(held_out[name])
        assert geo < 0.20 and worst < 2.0, name
    # DGX H100 and Lambda B200 miss 2x on one row each, a row their own run contradicts
    # (out-of-place 68 us against 13.5 us in-place at 32 B; 241 against 126 us at 512 KiB),
    # as Crusoe A100 nearly does (193 against 100 us at 256 KiB): without it each is within
    # 2x below 1 MiB and 20 % above
    by_name = {t.name: t for t in TABLES}
    for name in ("dgx-h100-1x8-nvls", "lambda-b200-2x8-ib", "crusoe-a100-2x8-ib"):
        bad = by_name[name].contradicted()
        assert len(bad) == 1, name
        geo, worst = nccl_accuracy.summary([(n, m, p) for n, m, p, _ in held_out[name]
                                            if n not in bad])
        assert geo < 0.20 and worst < 2.0, name
    # the RTX 5090 run (two ranks sharing one GPU) contradicts itself on 8 of its 18 sizes
    assert len(by_name["rtx5090-2x1-socket"].contradicted()) == 8


def test_a_thread_driving_several_gpus_pays_their_launches():
    # the B300 and Modal A100 tables are nccl-tests -g 8 (one thread, 8 GPUs), the 1 x 4 H100
    # one -g 4: the fit charges each more GPU a launch (timing.launch_us), which the product, one
    # process per GPU, never adds (only `collective --measured` of a -g N run adds it, to compare
    # like with like)
    per_thread = {t.name: t.gpus_per_thread for t in TABLES if t.gpus_per_thread > 1}
    assert per_thread == {"b300-1x8-nvls": 8, "modal-a100-1x8-g8": 8, "h100-1x4-g4": 4}
    local = fitted.FITTED["local"]
    assert 1.0 < local.launch < 5.0  # µs a launch: the scale of one kernel launch
    model = NcclModel.for_topology("h100", 1, 8, True, 0.0, 0, "2.30.7", None)
    params, _ = model.time_params()
    assert model.timed_us(K.ALL_REDUCE, 8) == pytest.approx(
        time_us(params, model.features(K.ALL_REDUCE, 8)))  # no launch term in the product
    assert model.timed_us(K.ALL_REDUCE, 8, 8) == pytest.approx(
        model.timed_us(K.ALL_REDUCE, 8) + 7 * local.launch)
    pts, _ = nccl_accuracy.points()
    res = loco(pts)
    for name, gpus in per_thread.items():
        # held out, the launch term is the one the OTHER -g tables teach ...
        rest = fit([p for p in pts if p.table != name])["local"]
        assert rest.launch * 7 > 10.0, name
        assert all(pred == pytest.approx(time_us(rest, p.feats) + (gpus - 1) * rest.launch)
                   for p, pred, _ in res[name])
    # ... and with neither -g table the fit has nothing to set it from
    assert fit([p for p in pts if p.gpus_per_thread == 1])["local"].launch == 0.0


def test_nccl_versions_the_sources_state():
    # dstack's nccl-tests task runs /opt/nccl-tests of dstack's default image, which builds
    # NCCL 2.26.2-1 (docker/base/Dockerfile, ARG NCCL_VERSION, 2025-06 to 2026-06): its Nebius
    # and GCP A4 examples are 2.26.2 as its Lambda example prints (nccl-library=22602); the
    # A3 Mega TCPXO run loads the plugin directory's libnccl.so.2.21.5 (its README)
    by_name = {t.name: t.model().version for t in TABLES}
    assert by_name["nebius-h100-2x8-ib"] == by_name["gcp-a4-2x8-b200-roce"] == "2.26.2"
    assert by_name["lambda-b200-2x8-ib"] == by_name["crusoe-a100-2x8-ib"] == "2.26.2"
    assert by_name["gcp-a3ultra-2x8-h200-roce-ag"] == "2.26.6"  # printed by the run
    assert by_name["gcp-a3mega-2x8-h100-tcpxo"] == "2.21.5"


def test_channels_follow_enqueue_cc_trimming():
    # enqueue.cc:2090-2096: drop a channel while nBytes < nc x nThreads x threshold
    assert channels_used("Ring", "Simple", 64 * 512 * 16, 16, 16) == 16
    assert channels_used("Ring", "Simple", 64 * 512 * 16 - 1, 16, 16) == 15
    assert channels_used("Ring", "LL", 8 * 16 * 512 * 4, 16, 16) == 4  # ring LL: x nRanks
    assert channels_used("Tree", "LL128", 1, 16, 16) == 1
    assert channels_used("NVLS", "Simple", 1, 16, 16) == 16


def test_the_latency_a_network_reports_enters_nccl_s_choice():
    # tuning.cc:389-391 adds the graph's latencyInter (the NET's reported latency,
    # search.cc:745) to every network hop, twice for Simple; NCCL's IB transport reports 0
    # (net_ib/init.cc:558), aws-ofi-nccl 75 us on EFA (platform-aws.cpp:87-137)
    from dataclasses import replace
    ib = NcclModel.for_platform("dgx-h100", 2, "2.30.7")
    assert ib.link_net == "ib" and ib.plugin_latency_us == 0.0
    roce = replace(ib, net="roce")
    efa = replace(ib, net="efa")
    assert efa.plugin_latency_us == 75.0
    for n in (8, 1 << 16, 1 << 22, 1 << 28):
        assert ib.choice(K.ALL_REDUCE, n) == roce.choice(K.ALL_REDUCE, n)
    a, p, us = ib.choice(K.ALL_REDUCE, 8)
    a2, p2, us2 = efa.choice(K.ALL_REDUCE, 8)
    assert (a, p) == (a2, p2) == ("Tree", "LL") and us2 == pytest.approx(us + 2 * 75.0, abs=0.01)
    assert efa.time_ms(K.ALL_REDUCE, 8) > ib.time_ms(K.ALL_REDUCE, 8)
    assert NcclModel.for_platform("aws-p5", 2, "2.30.7").link_net == "efa"
    assert NcclModel.for_platform("aws-p5", 1, "2.30.7").link_net is None  # one node: NVLink
    assert NcclModel.for_platform("aws-p5en", 2, "2.30.7").plugin_latency_us == 35.0


def test_nics_as_nccl_counts_them():
    # aws-ofi-nccl's RDMA protocol shows the 4 EFA NICs of a p5 GPU as one 400 Gb/s device
    # (nccl_ofi_rdma.cpp:410-413): the graph is that of 8 x 400G, as on DGX H100
    p5 = NcclModel.for_platform("aws-p5", 2, "2.30.7")
    dgx = NcclModel.for_platform("dgx-h100", 2, "2.30.7")
    assert p5.nic_devices == 8 and (p5.ring, p5.tree, p5.nvls) == (dgx.ring, dgx.tree, dgx.nvls)
    # 16 RoCE ports on 8 GPUs: NCCL 2.20+ merges the two ports of a NIC (NCCL_IB_MERGE_NICS)
    oci = NcclModel.for_topology("a100", 2, 8, True, 1600, 16, "2.26.5", "roce")
    merged = NcclModel.for_topology("a100", 2, 8, True, 1600, 8, "2.26.5", "roce")
    assert oci.nic_devices == 8 and oci.ring == merged.ring
    assert NcclModel.for_topology("a100", 2, 8, True, 1600, 16, "2.19.3", "roce").nic_devices is None
    assert "NCCL sees 8" in oci.summary()
    # p4d: 4 EFA NICs for 8 GPUs stay 4 (SENDRECV, no grouping)
    assert NcclModel.for_platform("aws-p4d", 2, "2.23.4").nic_devices is None


def test_the_model_knows_its_error_and_collective_prints_it():
    m = NcclModel.for_platform("aws-p5", 2, "2.30.7")
    band = m.error(K.ALL_REDUCE, 1 << 20)
    assert band is not None and band.low < 0 < band.high
    assert "several nodes" in band.basis and "no training table measured" not in band.basis
    result = run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2", "--nccl",
                 "2.30.7", "--sizes", "8,1M,1G", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["topology"]["net"] == "efa" and doc["topology"]["time_model"]["class"] == "efa-rdma"
    for r in doc["rows"]:
        b = m.error_charged(K.ALL_REDUCE, r["bytes"])
        assert r["error_band"] == b.to_json() and r["predicted_us"] > 0
    text = run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2", "--nccl",
               "2.30.7", "--sizes", "1M").stdout
    assert "error band" in text and band.text() in text


def test_a_transport_whose_own_tables_miss_further_widens_its_band(held_out):
    # the held-out errors recomputed here per class, not read from ERROR_BANDS
    multi = {t.name: t.multi_node for t in TABLES}
    cls = {t.name: t.nccl().time_class for t in TABLES}

    def errors(lo, hi, net=None, own=True):
        return sorted(pred / meas - 1 for name, rows in held_out.items() if multi[name]
                      and (net is None or cls[name] == net)
                      for n, meas, pred, used in rows if lo <= n < hi
                      and (used == cls[name]) == own)

    def p(errs, f):
        return round(errs[round(f * (len(errs) - 1))], 4)

    def band(net, nbytes, nics=4, gbps=800.0):
        m = NcclModel.for_topology("h100", 2, 8, True, gbps, nics, "2.30.7", net)
        return m.error_charged(K.ALL_REDUCE, nbytes)

    lo, hi = 256 << 20, 1 << 40  # GCP A3 High's three TCPX tables, each held out against TCPX's
    pooled, own = errors(lo, hi), errors(lo, hi, "tcpx")
    assert len(own) >= 3 and p(own, 0.1) < p(pooled, 0.1) and p(own, 0.9) > p(pooled, 0.9)
    b = band("tcpx", 1 << 30)
    assert (b.low, b.high) == (p(own, 0.1), p(own, 0.9))
    assert "widened" in b.basis and "over tcpx (3 tables)" in b.basis
    # InfiniBand from 256 MiB: inside the network spread, kept
    pooled, own = errors(lo, hi), errors(lo, hi, "ib")
    assert p(pooled, 0.1) <= p(own, 0.1) and p(own, 0.9) <= p(pooled, 0.9)
    b = band("ib", 1 << 30, 8, 3200.0)
    assert (b.low, b.high) == (p(pooled, 0.1), p(pooled, 0.9)) and "widened" not in b.basis
    # a class one cluster measured (TCPXO: A3 Mega's two tables) is held out against another
    # class's constants: those errors do not widen its band, which says no cluster checks it
    assert {used for n in ("gcp-a3mega-2x8-h100-tcpxo", "gcp-a3mega-2x8-h100-tcpxo-ag")
            for *_, used in held_out[n]} == {"network"}
    # (but by how far the shipped constants miss its own tables: the test below)
    inside = nccl_accuracy.in_sample()
    fit_errs = sorted(pred / meas - 1 for n in ("gcp-a3mega-2x8-h100-tcpxo",
                                                "gcp-a3mega-2x8-h100-tcpxo-ag")
                      for size, meas, pred, _ in inside[n] if 16 << 20 <= size < 256 << 20)
    b = band("tcpxo", 64 << 20, 8, 1600.0)
    assert (b.low, b.high) == (min(p(errors(16 << 20, 256 << 20), 0.1), p(fit_errs, 0.1)),
                               max(p(errors(16 << 20, 256 << 20), 0.9), p(fit_errs, 0.9)))
    assert "which no other cluster of tcpxo checks" in b.basis
    # those errors are the band of a class no table measured (timed as its family)
    from tracecli.costs.nccl.accuracy import error_table
    fallback = errors(16 << 20, 256 << 20, own=False)
    b = error_table("network", "efa-new", "libfabric").at(None, 64 << 20)
    assert (b.low, b.high) == (p(fallback, 0.1), p(fallback, 0.9))
    assert "no training table measured efa-new: timed as libfabric" in b.basis


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


def test_nvls_chunks_follow_calc_coll_chunking():
    # enqueue.cc:2262-2288 (the same from v2.18.3-1): NVLS shrinks its 128 KiB chunk to 64, 32,
    # 16 KiB below 64, 8, 2 loops of channels x heads x chunk; NVLSTree to 256/128/64/32 KiB
    # below 32/16/4/1, its largest 64 KiB from 4 nodes (nvls.cc:225-227)
    ops = 16 * 8
    assert chunk_bytes("NVLS", 64 * ops * 128 * 1024, ops, 1) == 128 * 1024
    assert chunk_bytes("NVLS", 64 * ops * 128 * 1024 - 1, ops, 1) == 64 * 1024
    assert chunk_bytes("NVLS", 8 * ops * 64 * 1024 - 1, ops, 1) == 32 * 1024
    assert chunk_bytes("NVLS", 2 * ops * 32 * 1024 - 1, ops, 1) == 16 * 1024
    assert chunk_bytes("NVLSTree", 4 * ops * 128 * 1024, ops, 2) == 128 * 1024
    assert chunk_bytes("NVLSTree", 4 * ops * 128 * 1024 - 1, ops, 2) == 64 * 1024
    assert chunk_bytes("NVLSTree", ops * 64 * 1024 - 1, ops, 2) == 32 * 1024
    assert chunk_bytes("NVLSTree", 1 << 34, ops, 4) == 64 * 1024
    # nvlsChannels: 16 on sm90, 24 on one sm100 node, 32 on several (nvls.cc:155-157, 208-214)
    assert (nvls_channels(90, 1), nvls_channels(100, 1), nvls_channels(100, 2)) == (16, 24, 32)
    assert loop_bytes("NVLS", 1 << 30, 16, 1, 8) == 128 * 1024 * 16 * 8
    # the fill: stages beyond the first (NVLS 2: scatter, reduce/multicast, gather; NVLSTree
    # adds log2(nodes) tree levels up and down) x one loop, or all the bytes below one loop;
    # a ring or a tree none
    assert fill_bytes("NVLS", 1 << 30, 90, 1, 8) == 2 * 16 * 8 * 128 * 1024
    assert fill_bytes("NVLS", 1 << 20, 90, 1, 8) == 2 << 20
    assert fill_bytes("NVLSTree", 1 << 30, 90, 4, 8) == (2 + 2 * 2) * 16 * 8 * 64 * 1024
    assert fill_bytes("Ring", 1 << 30, 90, 2, 8) == fill_bytes("Tree", 1 << 30, 90, 2, 8) == 0


def test_nvlstree_fill_beyond_two_nodes_runs_at_nccl_s_two_node_bandwidth():
    # NCCL halves NVLSTree's network bandwidth beyond two nodes, its double binary tree's
    # steady state; one loop's fill crosses each hop once (pipeline.py): it is priced at what
    # NCCL gives the same graph on two nodes, in units of NCCL's bandwidth on these nodes.
    from tracecli.costs.nccl.tuning import AlgoGraph
    h100 = AlgoGraph(8, 40.0, 48.0)  # the 4 x 8 H100 NVLS graph: 8 channels, 40/48 GB/s
    # v2.24.3-1 tuning.cc:246: min(bwIntra, nNodes <= 2 ? bwInter : bwInter/2)
    assert fill_scale("NVLSTree", h100, 4, 90, "2.24.3") == pytest.approx(
        min(40.0, 48.0 / 2) / min(40.0, 48.0))
    # v2.30.7-1 tuning.cc:310-322: min(bwIntra * nvlsEfficiency 0.85 (tuning.cc:139-144) *
    # (nChannels-1)/nChannels * 2 (all-reduce), bwInter * (2 on <= 2 nodes), the per-channel
    # cap perChMaxNVLSTreeBws[Hopper] 57.7 on 2 nodes, 45.5 on 4, tuning.cc:205-211)
    intra = 40.0 * 0.85 * 7 / 8 * 2
    assert fill_scale("NVLSTree", h100, 4, 90, "2.30.7") == pytest.approx(
        min(intra, 48.0, 45.5) / min(intra, 2 * 48.0, 57.7), rel=1e-6)
    # 2.18 prices the graph's own bandwidth, bwIntra on 2 nodes, bwInter beyond (v2.18.6-1
    # tuning.cc:174): no tree-load halving, nothing to undo, whatever the graph
    assert fill_scale("NVLSTree", h100, 8, 90, "2.18.6") == 1.0
    assert fill_scale("NVLSTree", AlgoGraph(8, 48.0, 24.0), 8, 90, "2.18.6") == 1.0
    # two nodes, NVLS, a ring, no graph: NCCL's bandwidth as it is
    assert fill_scale("NVLSTree", h100, 2, 90, "2.24.3") == 1.0
    assert fill_scale("NVLS", h100, 4, 90, "2.24.3") == fill_scale("Ring", h100, 4, 90) == 1.0
    assert fill_scale("NVLSTree", None, 4, 90, "2.24.3") == 1.0
    loop = 16 * 8 * 64 * 1024  # 16 NVLS channels x 8 heads x the 64 KiB chunk from 4 nodes
    assert fill_bytes("NVLSTree", 1 << 30, 90, 4, 8, "2.24.3", h100) == round(6 * loop * 0.6)
    assert fill_bytes("NVLSTree", 1 << 30, 90, 2, 8, "2.24.3", h100) == 4 * 2 * loop
    # the model passes its NVLS graph: the 4 x 8 H100 table's fill is 0.6 of the stages' bytes
    m = next(t for t in TABLES if t.name == "voltagepark-h100-4x8-ib").nccl()
    assert m.choice(K.ALL_REDUCE, 64 << 20)[0] == "NVLSTree"
    f = m.features(K.ALL_REDUCE, 64 << 20)  # fill and bandwidth terms at NCCL's bandwidth
    assert f[6] / f[3] == pytest.approx(round(6 * (8 << 20) * 0.6) / (64 << 20))


def test_the_fill_and_the_channel_factor_are_fitted_within_reason():
    # one for all classes; the fill a fraction of a loop a stage (pulled toward 0, never
    # negative), the channel factor between none of the reduction showing (-bw) and all (0)
    for key, p in fitted.FITTED.items():
        assert 0.2 < p.fill < 1.0 and -0.8 < p.chan < -0.2, key
        # fewer channels: never faster, LL on a network included
        assert p.bw + min(p.ring_net, 0.0) + min(p.ll_net, 0.0) + p.chan > 0, key
        # a ring on a network: a few per cent faster than the other picks' common factor
        assert -0.15 < p.ring_net < 0.0, key
    # the terms: fill µs at NCCL's bandwidth; the channel term is what the reduction adds
    f = features(5.0, 100.0, 1 << 20, 4, 16, False, False, True, 3 << 20)
    assert f[6] == pytest.approx(3 * (1 << 20) / 1e5) and f[7] == pytest.approx(3 * f[3] / 4)
    assert f[8] == 0.0  # the ring's share: a ring on several nodes only
    assert features(5.0, 100.0, 1 << 20, 16, 16, True, ring=True)[8] == pytest.approx((1 << 20) / 1e5)
    assert features(5.0, 100.0, 1 << 20, 16, 16, False, ring=True)[8] == 0.0


def test_ll_on_a_network_is_a_term_of_its_own():
    # the tenth term: the bandwidth term again where the pick is LL on several nodes, never
    # on one node, never for another protocol
    f = features(5.0, 100.0, 1 << 20, 16, 16, True, ll=True)
    assert f[9] == pytest.approx(f[3]) and f[9] == pytest.approx((1 << 20) / 1e5)
    assert features(5.0, 100.0, 1 << 20, 16, 16, False, ll=True)[9] == 0.0
    assert features(5.0, 100.0, 1 << 20, 16, 16, True)[9] == 0.0
    # the model passes its pick's protocol: Tree/LL at 8 B on 2 x 8 H100, Simple at 1 GiB
    m = NcclModel.for_platform("dgx-h100", 2, "2.30.7")
    assert m.choice(K.ALL_REDUCE, 8)[1] == "LL" and m.features(K.ALL_REDUCE, 8)[9] > 0
    assert m.choice(K.ALL_REDUCE, 1 << 30)[1] == "Simple"
    assert m.features(K.ALL_REDUCE, 1 << 30)[9] == 0.0
    one = NcclModel.for_platform("dgx-h100", 1, "2.30.7")
    assert one.choice(K.ALL_REDUCE, 8)[1] == "LL" and one.features(K.ALL_REDUCE, 8)[9] == 0.0
    # fitted: all networks' share never below 0, one node none; a class's share moves LL's
    # time as the table says (Slingshot's LL runs slower than NCCL's price, RoCE's faster)
    assert fitted.FITTED["network"].ll_net >= 0.0 and fitted.FITTED["local"].ll_net == 0.0
    assert fitted.FITTED["ofi"].ll_net > 1.0 > fitted.FITTED["roce"].bw + fitted.FITTED["roce"].ll_net
    # an NVLS pick of a few MiB pays its fill; at 8 GiB it is a few per cent
    m = NcclModel.for_topology("h100", 1, 8, True, 0.0, 0, "2.30.7", None)
    assert m.choice(K.ALL_REDUCE, 8 << 20)[0] == "NVLS"
    small, big = m.features(K.ALL_REDUCE, 8 << 20), m.features(K.ALL_REDUCE, 8 << 30)
    assert small[6] > 0.5 * small[3] and big[6] < 0.05 * big[3]


def test_efa_is_timed_by_the_protocol_aws_ofi_nccl_runs():
    # platform-aws.cpp v1.16.3:75-205: SENDRECV on p4d/p4de, RDMA on p5, p5e, p5en, p6
    for name, cls in (("aws-p4d", "efa-sendrecv"), ("aws-p4de", "efa-sendrecv"),
                      ("aws-p5", "efa-rdma"), ("aws-p5e", "efa-rdma"), ("aws-p5en", "efa-rdma"),
                      ("aws-p6-b200", "efa-rdma")):
        m = NcclModel.for_platform(name, 2, "2.30.7")
        assert (m.link_net, m.time_class, m.time_params()[1]) == ("efa", cls, cls), name
        assert m.on(32).time_class == cls  # another scale keeps the platform's protocol
    # hardware given by flags reads as the listed instance it matches: p6-b200's 8 NICs for 8
    # GPUs as RDMA (as --platform aws-p6-b200), p4d's 4 for 8 as SENDRECV
    b200 = NcclModel.for_topology("b200", 2, 8, True, 3200.0, 8, "2.30.7", "efa")
    p6 = NcclModel.for_platform("aws-p6-b200", 2, "2.30.7")
    assert b200.time_class == "efa-rdma"
    assert b200.timed_us(K.ALL_REDUCE, 8) == pytest.approx(p6.timed_us(K.ALL_REDUCE, 8))
    assert NcclModel.for_topology("a100", 2, 8, True, 400.0, 4, "2.30.7", "efa").time_class \
        == "efa-sendrecv"
    # the shipped floors: the RDMA protocol's small all-reduce is the faster one (p5's table:
    # 63-86 us from 8 B to 1 KiB, p4d's 177-181 us)
    fast, slow = (NcclModel.for_platform(n, 2, "2.23.4").timed_us(K.ALL_REDUCE, 8)
                  for n in ("aws-p5", "aws-p4d"))
    assert 60 < fast < 90 < 170 < slow < 200


def test_a_copy_of_a_model_times_itself_not_the_original():
    from dataclasses import replace

    m = NcclModel.for_platform("aws-p5", 2, "2.30.7")
    m.timed_us(K.ALL_REDUCE, 1 << 20)  # fills its caches
    ib = replace(m, net="ib")
    fresh = NcclModel.for_platform("aws-p5", 2, "2.30.7")
    fresh = replace(fresh, net="ib")
    assert ib.time_params()[1] == "ib"
    assert ib.timed_us(K.ALL_REDUCE, 1 << 20) == fresh.timed_us(K.ALL_REDUCE, 1 << 20)
    assert replace(m, name="nccl:aws-p4d").time_params()[1] == "efa-sendrecv"


def test_a_band_borrowed_from_other_classes_says_so():
    text = run("collective", "allreduce", "--platform", "aws-p5", "--nodes", "2", "--sizes",
               "8,1M").stdout
    flat = " ".join(text.split())
    assert "efa-rdma was measured by one cluster's tables, which no other cluster of it checks" \
        in flat
    text = run("collective", "allreduce", "--platform", "dgx-h100", "--nodes", "2", "--sizes",
               "8,1M").stdout
    assert "measured by one cluster" not in " ".join(text.split())


def test_a_band_takes_in_how_far_the_constants_miss_their_own_tables():
    # the shipped constants on ofi's own tables (CSCS Alps, one cluster): no held-out table of
    # ofi would be timed better than its own fitted ones, so its band below 64 KiB, otherwise
    # other classes' held-out spread, takes their errors in
    inside = nccl_accuracy.in_sample()
    ofi = {t.name for t in TABLES if t.multi_node and t.nccl().time_class == "ofi"}
    errs = sorted(pred / meas - 1 for name in ofi for n, meas, pred, used in inside[name]
                  if n < 64 << 10)
    assert len(errs) >= 3 and {used for name in ofi for *_, used in inside[name]} == {"ofi"}
    p90 = round(errs[round(0.9 * (len(errs) - 1))], 4)
    network = [row for row in fitted.ERROR_BANDS["network"] if row[0] == 0][0]
    assert p90 > network[3]  # further than the network's spread: widened
    m = NcclModel.for_platform("cscs-alps-gh200", 2, "2.25.1")
    b = m.error_charged(K.ALL_REDUCE, 8)
    assert b.high == pytest.approx(p90) and b.low <= min(errs[round(0.1 * (len(errs) - 1))], 0)
    assert f"ofi's own {len(errs)} sizes under the constants fitted on them" in b.basis
    text = " ".join(run("collective", "allreduce", "--platform", "cscs-alps-gh200", "--nodes",
                        "2", "--sizes", "8").stdout.split())
    assert "widened where the constants miss their own class's tables by more" in text
