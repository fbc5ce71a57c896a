"""NCCL's printed TUNING table, reproduced cell for cell from the graph values (fixtures/nccl/README.md)."""

from pathlib import Path

import pytest

from tracecli.costs.nccl.nccllog import read_nccl_log
from tracecli.costs.nccl.algotime import algo_time, best
from tracecli.costs.nccl.tuning import (ALGOS, FUNCS, PROTOS, RING, SIMPLE, TREE, AlgoGraph, Comm,
                                         tune)
from tracecli.costs.nccl.versions import constants_for

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"

# eunomia-bpf/nccl-eBPF docs/tmp/default-suboptimal-search.md: 2 ranks on 2 NCCL "hosts"
# (NCCL_HOSTID), one RTX 5090 (sm120), NET=Socket, P2P/SHM off. The log is TUNING only: the ring
# and tree graphs' nChannels x bw (2.4 and 4.8 GB/s) are solved from its Ring/Simple and
# PAT/Simple cells; every other cell is then a check.
RTX = Comm(2, 2, 120, ring=AlgoGraph(2, 1.2, 1.2, nvlink=False, ll128=False),
           tree=AlgoGraph(4, 1.2, 1.2, nvlink=False, ll128=False), tree_pattern_tree=True)


def test_every_cell_of_the_2_29_7_table_matches_to_its_printed_precision():
    log = read_nccl_log(str(FIX / "ebpf_rtx5090_2x1_2.29.7.log"))
    assert log.version.startswith("2.29.7") and len(log.table) == 105
    table = tune(RTX, constants_for(log.version))
    wrong = []
    for (f, a, p), (lat, bw, line) in log.table.items():
        i, j, k = FUNCS.index(f), ALGOS.index(a), PROTOS.index(p)
        ours = "%8.1f/%6.1f" % (table.lat[i][j][k], table.bw[i][j][k])
        if ours != "%8.1f/%6.1f" % (lat, bw):
            wrong.append((line, f, a, p, ours))
    assert wrong == []


def test_the_choices_nccl_logged_are_the_argmin():
    log = read_nccl_log(str(FIX / "ebpf_rtx5090_2x1_2.29.7.log"))
    table = tune(RTX, constants_for(log.version))
    choices = log.choices_of("Broadcast")
    assert choices
    for nbytes, algo, proto, _ in choices:
        _, a, p = best(table, "Broadcast", nbytes)
        assert (ALGOS[a].upper(), PROTOS[p].upper()) == (algo, proto)


def test_a_log_of_another_collective_is_refused():
    from tracecli.errors import CalibrationError
    log = read_nccl_log(str(FIX / "ebpf_rtx5090_2x1_2.29.7.log"))
    with pytest.raises(CalibrationError, match="for Broadcast, not AllReduce") as e:
        log.choices_of("AllReduce")
    assert e.value.line == 29


def test_versions_outside_the_modelled_range_are_refused():
    # 2.18-2.20 are modelled since issue 23 (their tuning.cc read); 2.17 is refused with why
    with pytest.raises(ValueError, match="no NVLSTree.*2.18 to 2.30"):
        constants_for("2.17.1")
    assert constants_for("2.20.5").tag == constants_for("2.19.3").tag == "v2.20.5-1"
    assert constants_for("2.18.3").tag == "v2.18.6-1"
    assert constants_for("2.21.5").tag == constants_for("2.22.3").tag == "v2.21.5-1"
    assert constants_for("2.28.9").hw[2][5] == (0, 0, 20.9)
    assert constants_for("2.28.3").hw[2][5] == (0, 0, 14)


# NVIDIA/nccl#1453 (NCCL 2.22.3, 3 nodes x 8 H100 SXM, 8 ConnectX-7 a node, all_reduce_perf):
# rank 0's per-size choice lines "N Bytes -> Algo A proto P time T" print NCCL's own model time.
# The log has no GRAPH lines; the graphs are solved from two points and the rest are checks:
# Ring/Simple at 8 GiB gives the ring's nChannels x bwInter = 192 GB/s (8 x 24; the log's
# "Channel 05/16" lines give comm->nChannels = 16), Tree/LL128 at 128 KiB gives the tree's
# 192 GB/s with pattern TREE. Tree/LL sits on the Intel N4 LL cap (20.4 GB/s), so the CPU is Intel.
H100_3X8 = Comm(24, 3, 90, ring=AlgoGraph(8, 24.0, 24.0), tree=AlgoGraph(8, 24.0, 24.0),
                tree_pattern_tree=True, comm_channels=16)
# NVIDIA/nccl#1595 (8 H100 on NVLink, one node, NCCL_PROTO=Simple): ring graph 12 x 30 GB/s.
H100_1X8 = Comm(8, 1, 90, ring=AlgoGraph(12, 30.0, 30.0), tree=AlgoGraph(12, 30.0, 30.0))


def _nccl_time(us: float) -> str:
    return "%f" % us  # NCCL prints the float time with %f


def test_nccl_2_22_model_times_on_3x8_h100_match_to_the_printed_digit():
    log = read_nccl_log(str(FIX / "nccl1453_h100_3x8_2.22.3_choices.log"))
    table = tune(H100_3X8, constants_for("2.22.3"))
    assert len(log.choices_of("AllReduce")) == 9
    for nbytes, algo, proto, printed in log.choices_of("AllReduce"):
        us, a, p = best(table, "AllReduce", nbytes)
        assert (ALGOS[a].upper(), PROTOS[p].upper()) == (algo, proto), nbytes
        assert _nccl_time(us) == _nccl_time(printed), nbytes


def test_the_2_23_constants_do_not_reproduce_the_2_22_log():
    # 2.23 charges 2(nNodes-1) network steps to a ring (2.22: 2 nNodes) and drops tree/Simple's
    # 28 us hardware latency: the 8 GiB ring time moves, so the version's constants matter.
    log = read_nccl_log(str(FIX / "nccl1453_h100_3x8_2.22.3_choices.log"))
    nbytes, _, _, printed = log.choices_of("AllReduce")[-1]
    us, _, _ = best(tune(H100_3X8, constants_for("2.23.4")), "AllReduce", nbytes)
    assert _nccl_time(us) != _nccl_time(printed) and abs(us - printed) > 10


def test_nccl_ring_simple_times_on_1x8_h100_match():
    # NCCL_PROTO=Simple: only Simple pairs compete. 805306368 B is the all-reduce, 1026048 B an
    # all-gather or reduce-scatter (the line does not say which; both cost the same here).
    log = read_nccl_log(str(FIX / "nccl1595_h100_1x8_simple_choices.log"))
    (big, *_, t_big), (small, *_, t_small) = log.choices_of("AllReduce")
    for version in ("2.22.3", "2.23.4", "2.30.7"):  # ring/Simple constants are the same in all
        table = tune(H100_1X8, constants_for(version))
        assert _nccl_time(algo_time(table, "AllReduce", RING, SIMPLE, big)) == _nccl_time(t_big)
        assert all(algo_time(table, "AllReduce", a, SIMPLE, big) > t_big for a in (TREE,))
        for func in ("AllGather", "ReduceScatter"):
            assert _nccl_time(algo_time(table, func, RING, SIMPLE, small)) == _nccl_time(t_small)


def test_nccl_2_19_2_20_price_ring_ll_at_a_quarter_and_2_18_puts_nvls_latency_in_its_base():
    # v2.20.5-1 tuning.cc:181: ring LL bus x1/4 on several nodes or for all-reduce, else x1/3;
    # v2.21.5-1: x0.5. Hopper's LL cap (tuning.cc:89) is Ampere's 87.7 GB/s before 2.21.
    old, new = tune(H100_1X8, constants_for("2.20.5")), tune(H100_1X8, constants_for("2.21.5"))
    f, ring, ll = FUNCS.index("AllReduce"), ALGOS.index("Ring"), PROTOS.index("LL")
    assert old.bw[f][ring][ll] == pytest.approx(min(87.7, 12 * 30.0 / 4) * 8 / 14, rel=1e-6)
    assert new.bw[f][ring][ll] == pytest.approx(min(141.0, 12 * 30.0 / 2) * 8 / 14, rel=1e-6)
    bc = FUNCS.index("Broadcast")
    assert old.bw[bc][ring][ll] == pytest.approx(min(87.7, 12 * 30.0 / 3), rel=1e-6)
    # v2.18.6-1 tuning.cc:57-59, 236: NVLS costs its 23 us base on one node; 2.19+ the NVLink row
    nv = Comm(8, 1, 90, ring=AlgoGraph(12, 30.0, 30.0), tree=AlgoGraph(12, 30.0, 30.0),
              nvls=AlgoGraph(8, 40.0, 60.0), nvls_support=True)
    simple, nvls = PROTOS.index("Simple"), ALGOS.index("NVLS")
    assert tune(nv, constants_for("2.18.6")).lat[f][nvls][simple] == 23.0
    assert tune(nv, constants_for("2.20.5")).lat[f][nvls][simple] == 23.0
    assert tune(nv, constants_for("2.21.5")).lat[f][nvls][simple] == 25.0
    # 2.18 prices NVLS at the graph's own bandwidth (no min with bwInter): 8 x 40 x 5/6
    assert tune(nv, constants_for("2.18.6")).bw[f][nvls][simple] == pytest.approx(8 * 40 * 5 / 6, rel=1e-6)
