"""How far NcclModel's prediction from the topology alone lands from published nccl-tests runs.

Fixtures (tests/fixtures/nccl/README.md): all_reduce_perf on 2 x 8 H100 80GB HBM3 (GCP A3
Mega, 8 x 200 Gb/s NICs a node), and on 1 x 8 B300 on NVLink (NCCL 2.29.7). The bands asserted
here are those of NCCL's own model time (its ranking key, ``choice()``: the "before" of
docs/nccl-time-model.md), computed from the fixture, not copied from tracecli's output.
"""

from pathlib import Path

from tracecli.costs.nccl.model import NcclModel
from tracecli.costs.nccl.nccl_tests import read_nccl_tests
from tracecli.model import CollectiveKind as K

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


def _ratios():
    run = read_nccl_tests(str(FIX / "gcp_a3mega_h100_2x8_all_reduce_perf.txt"), "allreduce")
    assert run.ranks == 16 and len(run.rows) == 31
    model = NcclModel.for_topology("h100", 2, 8, True, nic_gbps=1600.0, nics=8)
    return run, model, {r.bytes: (model.choice(K.ALL_REDUCE, r.bytes)[2], r.time_us) for r in run.rows}


def test_small_sizes_miss_a_launch_floor_the_model_does_not_have():
    _, _, by_size = _ratios()
    small = {n: v for n, v in by_size.items() if n <= 64 << 10}
    assert len(small) == 14
    for n, (pred, meas) in small.items():
        assert 0.15 <= pred / meas <= 0.25, n           # 4-7x below the measurement
        assert meas - pred >= 95.0, n                   # ~100 us of floor NCCL's model leaves out
    # the floor is flat: the measurements at 8 B and 64 KiB differ by less than 25 us
    assert small[64 << 10][1] - small[16][1] < 40.0


def test_mid_sizes_are_under_predicted_and_large_sizes_land_within_20_percent():
    # From 8 MiB the model picks NVLS_TREE (NVLS is on for sm90 on NVSwitch, nvls.py), whose
    # latency (25 + 2 x 20.9 = 66.8 us, tuning.cc) is far below the ~120 us measured floor:
    # 128 KiB-64 MiB sit 2.5-5.5x below.
    _, model, by_size = _ratios()
    mid = [pred / meas for n, (pred, meas) in by_size.items() if (64 << 10) < n < (128 << 20)]
    big = {n: pred / meas for n, (pred, meas) in by_size.items() if n >= (128 << 20)}
    assert len(mid) == 10 and all(0.17 <= r <= 0.45 for r in mid)
    assert len(big) == 7 and all(0.55 <= r <= 1.2 for r in big.values())
    assert big[128 << 20] < 0.6                     # 128 MiB: still 40 % under (the floor)
    assert all(abs(r - 1) <= 0.2 for n, r in big.items() if n >= 512 << 20)


def test_at_8_gib_nvls_tree_is_picked_and_lands_within_20_percent():
    # Measured busbw 338.8 GB/s is above the 200 GB/s of a node's 8 x 200 Gb/s NICs, which a
    # 2-node tree or NVLS tree reaches and a ring cannot. The model picks NVLS_TREE on the
    # estimated NVLS graph (8 channels, 24/24 GB/s: the NICs bound it); 2.30's NVLS bandwidth
    # (tuning.cc:306-324) is min(24 x 0.85 x 7/8 x 2, 2 x 24, 57.7) a channel = 285.6 GB/s of
    # bus, so the model is slower by about the ratio of the two bus bandwidths.
    run, model, by_size = _ratios()
    last = run.rows[-1]
    assert model.choice(K.ALL_REDUCE, last.bytes)[:2] == ("NVLSTree", "Simple")
    nv = model.nvls
    nvls_bus = nv.n_channels * min(nv.bw_intra * 0.85 * 7 / 8 * 2, 2 * nv.bw_inter, 57.7)
    assert last.busbw_gbps > 1600 / 8 and abs(nvls_bus - 285.6) < 0.1
    pred, meas = by_size[last.bytes]
    assert abs(pred / meas - last.busbw_gbps / nvls_bus) < 0.01


# 8 x B300 SXM6 on NVLink, one node, NCCL 2.29.7 (eunomia-bpf/nccl-eBPF, fixtures README): the
# published table gives the out-of-place busbw of all_reduce_perf per size, averaged over 5 runs
# (2 decimals). Time = bytes x 2(n-1)/n / busbw. tracecli has no B300: the B200 entry (NVLink 5,
# 18 links, compute capability 10.x, as the B300) stands in for it.
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _b300_rows():
    rows = {}
    for line in (FIX / "ebpf_b300_1x8_allreduce_busbw_2.29.7.md").read_text().splitlines():
        cells = [c.strip().strip("*") for c in line.split("|")]
        if len(cells) > 3 and cells[1][:-1].isdigit() and cells[1][-1:] in _UNITS:
            nbytes = int(cells[1][:-1]) * _UNITS[cells[1][-1]]
            busbw = float(cells[2])
            assert busbw > 0
            rows[nbytes] = (busbw, nbytes * 2 * 7 / 8 / (busbw * 1e3))
    return rows


def test_one_node_nvlink_b300():
    rows = _b300_rows()
    assert len(rows) == 24 and min(rows) == 1024 and max(rows) == 8 << 30
    model = NcclModel.for_topology("b200", 1, 8, True, nic_gbps=0, nics=0, version="2.29.7")
    ratio = {n: model.choice(K.ALL_REDUCE, n)[2] / us for n, (_, us) in rows.items()}
    assert all(0.4 <= r <= 0.6 for n, r in ratio.items() if n <= 1 << 20)      # ~2x below: the floor
    # from 4 MiB the model picks NVLS (25 us flat latency, 8 x 90 GB/s): 4-64 MiB 32-40 % under
    nvls = [n for n in rows if model.choice(K.ALL_REDUCE, n)[0] == "NVLS"]
    assert min(nvls) == 4 << 20 and max(nvls) == 8 << 30
    assert all(0.55 <= ratio[n] <= 0.7 for n in rows if (4 << 20) <= n <= (64 << 20))
    assert 0.85 <= ratio[128 << 20] <= 0.92                                     # 11 % under
    assert all(abs(r - 1) <= 0.06 for n, r in ratio.items() if (256 << 20) <= n <= 1 << 30)
    # from 2 GiB the measured bus is 822-836 GB/s; the estimated NVLS graph carries
    # 8 x min(80 x 0.74 x 7/8 x 2, 90) = 720 GB/s (tuning.cc:306-324, 2.28+ model)
    nv = model.nvls
    nvls_bus = nv.n_channels * min(nv.bw_intra * 0.74 * 7 / 8 * 2, nv.bw_inter)
    assert (nv.n_channels, nv.bw_intra, nv.bw_inter) == (8, 80.0, 90.0) and nvls_bus == 720.0
    for n in (2 << 30, 4 << 30, 8 << 30):
        assert 1.10 <= ratio[n] <= 1.20
        assert abs(ratio[n] - rows[n][0] / nvls_bus) < 0.03


def test_a_topology_larger_than_every_training_table_says_it_is_extrapolated():
    from tracecli.costs.nccl import fitted
    from nccl_training import TABLES

    # the scale the tables measured, counted here from the training set itself
    ib = [t.nccl().topology for t in TABLES if t.multi_node and t.nccl().time_class == "ib"]
    most = (max(x.nodes for x in ib), max(x.gpus_per_node for x in ib))
    one_node = max(t.nccl().topology.gpus_per_node for t in TABLES if not t.multi_node)
    assert fitted.SCALE["ib"] == most and fitted.SCALE["local"] == (1, one_node)
    within = NcclModel.for_platform("dgx-h100", most[0])
    beyond = NcclModel.for_platform("dgx-h100", 128)
    assert within.beyond_scale() is None and "extrapolated" not in within.summary()
    assert within.describe()["time_model"]["scale"] == {
        "measured_nodes": most[0], "measured_gpus_per_node": most[1], "beyond": False}
    note = beyond.beyond_scale()
    assert note == (f"no ib table ran on more than {most[0]} nodes of {most[1]} GPUs: at 128 x 8 "
                    "the time and its band are extrapolated")
    assert note in beyond.summary() and note in beyond.error(K.ALL_REDUCE, 4 << 20).basis
    assert beyond.describe()["time_model"]["scale"]["beyond"] is True
    # more GPUs a node than any table of the class: as far beyond, on 2 nodes
    wide = NcclModel.for_topology("h100", 2, 16, True, nic_gbps=6400, nics=16)
    assert "at 2 x 16 the time" in wide.beyond_scale()
    big_node = NcclModel.for_topology("h100", 1, 16, True, nic_gbps=0, nics=0)
    assert big_node.beyond_scale() == (f"no one-node table ran on more than {one_node} GPUs: "
                                       "at 16 the time and its band are extrapolated")
    assert NcclModel.for_topology("h100", 1, 8, True, nic_gbps=0, nics=0).beyond_scale() is None
